package deadletter

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestNewWritesTheRowAsJSONUnderItsColumnNamesWithReasonAndTransform(t *testing.T) {
	type row struct {
		ID string `beam:"id"`
		N  int    `json:"ignored"`
		_  int
	}
	d := New("orders-dedup", row{ID: "o1", N: 2}, "NULL sequence value")
	assert.Equal(t, DeadLetter{Row: `{"id":"o1","N":2}`, Reason: "NULL sequence value", Transform: "orders-dedup"}, d)
}

func TestNewFallsBackToGoSyntaxForARowJSONCannotWrite(t *testing.T) {
	d := New("t", struct{ C chan int }{}, "r")
	assert.Equal(t, "{C:<nil>}", d.Row)
}

package step

import (
	"reflect"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// timedRow has an OnTime column.
type timedRow struct {
	TS time.Time `beam:"ts"`
}

// A row's OnTime value is its element time's millisecond and, past it, the
// microseconds the rules compare.
func TestCheckSplitsAnOnTimeValueIntoItsMillisecondAndMicroseconds(t *testing.T) {
	c := Columns{TimeCol: "ts"}
	require.NoError(t, c.Setup(reflect.TypeFor[timedRow]()))
	at := time.Date(2026, 12, 1, 10, 0, 0, 123_456_789, time.UTC)
	got, reason := c.check(0, reflect.ValueOf(timedRow{TS: at}), nil)
	require.Empty(t, reason)
	assert.Equal(t, beam.EventTime(at.UnixMilli()), got.ts)
	assert.Equal(t, uint16(456), got.micros)
	assert.False(t, got.row().Stamped)

	none := Columns{}
	require.NoError(t, none.Setup(reflect.TypeFor[timedRow]()))
	got, _ = none.check(42, reflect.ValueOf(timedRow{TS: at}), nil)
	assert.Equal(t, beam.EventTime(42), got.ts, "without OnTime, the element's timestamp")
	assert.True(t, got.row().Stamped)
}

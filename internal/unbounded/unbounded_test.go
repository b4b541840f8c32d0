package unbounded

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestWatermarkOnlyMovesForward(t *testing.T) {
	w := NewWatermark(1000)
	w.UpdateWatermark(time.UnixMilli(500))
	assert.Equal(t, int64(1000), w.State(), "an earlier time is ignored")
	w.UpdateWatermark(time.UnixMilli(2000))
	assert.Equal(t, int64(2000), w.State())
	assert.True(t, w.CurrentWatermark().Equal(time.UnixMilli(2000)))
}

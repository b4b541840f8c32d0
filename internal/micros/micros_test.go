package micros

import (
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/stretchr/testify/assert"
)

// The package, which imports no Beam, states Beam's timestamp range
// itself: if Beam's changed, this says so.
func TestTheTimeRangeIsBeamsTimestampRange(t *testing.T) {
	assert.Equal(t, int64(mtime.MinTimestamp), int64(MinMillis))
	assert.Equal(t, int64(mtime.MaxTimestamp), int64(MaxMillis))
}

func TestSplit_RoundsDownAndOfReverses(t *testing.T) {
	for _, us := range []int64{0, 1, 999, 1000, 1_234_567, -1, -999, -1000, -1001, MinMillis * 1000, (MaxMillis-1)*1000 + 999} {
		ms, sub := Split(us)
		assert.Less(t, sub, uint16(1000), "%d", us)
		assert.LessOrEqual(t, ms*1000, us, "%d: rounded down", us)
		assert.Equal(t, us, Of(ms, sub), "%d", us)
	}
	ms, sub := Split(-1)
	assert.Equal(t, int64(-1), ms)
	assert.Equal(t, uint16(999), sub)
}

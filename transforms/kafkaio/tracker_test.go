package kafkaio

import (
	"math"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/rtrackers/offsetrange"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A partition's tracker checkpoints (a split at fraction 0: the residual
// from the offset after the last claimed) and declines a runner's split at
// any larger fraction, which would leave the offsets between the primary's
// last record and the split point to neither reader.
func TestTrackerCheckpointsAtFractionZeroAndDeclinesOtherSplits(t *testing.T) {
	for _, fraction := range []float64{0.5, 0.01, 1} {
		tr := newTracker(offsetrange.Restriction{Start: 10, End: math.MaxInt64})
		tr.end.Store(100)
		require.True(t, tr.TryClaim(int64(10)))
		require.True(t, tr.TryClaim(int64(11)))
		primary, residual, err := tr.TrySplit(fraction)
		require.NoError(t, err)
		assert.Nil(t, residual, "fraction %v: declined", fraction)
		assert.Equal(t, offsetrange.Restriction{Start: 10, End: math.MaxInt64}, primary, "fraction %v: the restriction whole", fraction)
		assert.True(t, tr.TryClaim(int64(50)), "fraction %v: the reader reads on", fraction)
	}
	tr := newTracker(offsetrange.Restriction{Start: 10, End: math.MaxInt64})
	require.True(t, tr.TryClaim(int64(10)))
	require.True(t, tr.TryClaim(int64(11)))
	primary, residual, err := tr.TrySplit(0)
	require.NoError(t, err)
	assert.Equal(t, offsetrange.Restriction{Start: 10, End: 12}, primary)
	assert.Equal(t, offsetrange.Restriction{Start: 12, End: math.MaxInt64}, residual)
}

package kafkaio

import (
	"math"
	"sync/atomic"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/rtrackers/offsetrange"
)

// tracker is a partition's restriction tracker: Beam's growable offset
// range tracker, estimating with the partition's end offset as last seen.
// Only checkpoints (fraction 0) split it: a primary split at a larger
// fraction would stop at the first record past the split point, and the
// offsets passed over before that point (markers, aborted records) would
// be counted by neither reader, holding the partition's commit for good.
type tracker struct {
	*offsetrange.GrowableTracker
	end *endEstimate
}

func (t *tracker) TrySplit(fraction float64) (primary, residual any, err error) {
	if fraction > 0 {
		return t.GetRestriction(), nil, nil
	}
	return t.GrowableTracker.TrySplit(fraction)
}

// endEstimate is the partition's end offset as the reader last saw it.
type endEstimate struct{ atomic.Int64 }

func (e *endEstimate) Estimate() int64 { return e.Load() }

func newTracker(r offsetrange.Restriction) *tracker {
	e := &endEstimate{}
	e.Store(r.Start)
	t, _ := offsetrange.NewGrowableTracker(r, e) // fails only without an estimator
	return &tracker{GrowableTracker: t, end: e}
}

// finish ends rt's restriction without a residual: the partition is done.
func finish(rt *sdf.LockRTracker) {
	if end := rt.GetRestriction().(offsetrange.Restriction).End; end == math.MaxInt64 {
		rt.TryClaim(int64(math.MaxInt64 - 1))
	} else {
		rt.TryClaim(end)
	}
}

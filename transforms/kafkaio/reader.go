package kafkaio

import (
	"context"
	"math"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/rtrackers/offsetrange"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/beamdedup/beamdedup/internal/unbounded"
)

// readFn is the splittable DoFn of a partition's reader.
type readFn struct {
	Brokers     string
	Topic       string
	Group       string
	Reading     unbounded.Reading
	MaxInFlight int  // with Group: records read ahead of the group's committed offset, at most (0: no bound)
	Watched     bool // its partitions come from a watch (WatchPartitions), told when it ends

	adm           *kadm.Client
	controlWarned bool
}

func (fn *readFn) Setup() error {
	var err error
	fn.adm, err = adminFor(fn.Brokers)
	return err
}

func (fn *readFn) CreateInitialRestriction(p partition) offsetrange.Restriction {
	return offsetrange.Restriction{Start: p.Start, End: math.MaxInt64}
}

func (fn *readFn) SplitRestriction(_ partition, r offsetrange.Restriction) []offsetrange.Restriction {
	return []offsetrange.Restriction{r}
}

func (fn *readFn) RestrictionSize(_ partition, _ offsetrange.Restriction) float64 { return 1 }

func (fn *readFn) CreateTracker(r offsetrange.Restriction) *sdf.LockRTracker {
	return sdf.NewLockRTracker(newTracker(r))
}

func (fn *readFn) InitialWatermarkEstimatorState(et beam.EventTime, _ offsetrange.Restriction, _ partition) int64 {
	return int64(et)
}

func (fn *readFn) CreateWatermarkEstimator(ms int64) *unbounded.Watermark {
	return unbounded.NewWatermark(ms)
}

func (fn *readFn) WatermarkEstimatorState(w *unbounded.Watermark) int64 { return w.State() }

// inFlightPause is how long a reader held at MaxInFlight waits before its
// next bundle looks again.
const inFlightPause = 50 * time.Millisecond

// ProcessElement runs one bundle of a partition's reader: poll and emit
// until the bundle's time or record budget is spent, then checkpoint.
func (fn *readFn) ProcessElement(ctx context.Context, we *unbounded.Watermark, rt *sdf.LockRTracker, p partition,
	emit func(beam.EventTime, Record)) (sdf.ProcessContinuation, error) {
	b, err := fn.startBundle(ctx, we, rt, p)
	if err != nil {
		return nil, err
	}
	defer b.close(ctx)
	for b.More() {
		if b.StopRequested() {
			return b.end(ctx), nil
		}
		want, held := b.room(ctx)
		if held {
			// End the bundle, so that what it emitted can become safe.
			return sdf.ResumeProcessingIn(inFlightPause), nil
		}
		recs, answered, err := b.poll(ctx, want)
		if err != nil {
			return nil, err
		}
		if !answered {
			continue // a broker that does not answer is not idle
		}
		if len(recs) == 0 {
			if b.idle(ctx) {
				return b.end(ctx), nil
			}
			continue
		}
		if stop, err := b.emit(ctx, recs, emit); err != nil || stop {
			return sdf.StopProcessing(), err
		}
	}
	return sdf.ResumeProcessingIn(0), nil
}

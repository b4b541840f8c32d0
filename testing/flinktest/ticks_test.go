package flinktest

import (
	"context"
	"reflect"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/rtrackers/offsetrange"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
)

// Ticks is an unbounded PCollection<int64> of the tick indexes 0, 1, ...
// up to end: tick i at event time start + i*every, emitted once the wall
// clock has passed it, the watermark following the ticks. It asks to be
// resumed at its next tick (periodic.Impulse's way; on Flink it needs the
// project's job server, which keeps a resumption's sub-second delay and one
// state for all resumptions: notes/beam-defects.md, 22), and ends after its
// last tick, and with it a job whose only source it is.
func Ticks(s beam.Scope, start, end time.Time, every time.Duration) beam.PCollection {
	s = s.Scope("flinktest.Ticks")
	n := int64(0)
	if every > 0 && end.After(start) {
		n = int64(end.Sub(start) / every)
	}
	spec := tickSpec{StartMs: start.UnixMilli(), EveryMs: every.Milliseconds(), N: n}
	return beam.ParDo(s, &ticksFn{}, beam.Create(s, spec))
}

// tickSpec is the ticks' definition: n ticks from startMs, everyMs apart.
type tickSpec struct {
	StartMs, EveryMs, N int64
}

func (t tickSpec) at(i int64) time.Time { return time.UnixMilli(t.StartMs + i*t.EveryMs) }

// ticksFn emits a tickSpec's ticks as they fall due.
type ticksFn struct{}

func (*ticksFn) CreateInitialRestriction(t tickSpec) offsetrange.Restriction {
	return offsetrange.Restriction{Start: 0, End: t.N}
}

func (*ticksFn) SplitRestriction(_ tickSpec, r offsetrange.Restriction) []offsetrange.Restriction {
	return []offsetrange.Restriction{r}
}

func (*ticksFn) RestrictionSize(_ tickSpec, r offsetrange.Restriction) float64 {
	return float64(r.End - r.Start)
}

func (*ticksFn) CreateTracker(r offsetrange.Restriction) *sdf.LockRTracker {
	return sdf.NewLockRTracker(offsetrange.NewTracker(r))
}

// TruncateRestriction drops the ticks not yet emitted when the job drains.
func (*ticksFn) TruncateRestriction(*sdf.LockRTracker, tickSpec) offsetrange.Restriction {
	return offsetrange.Restriction{}
}

func (*ticksFn) CreateWatermarkEstimator() *sdf.ManualWatermarkEstimator {
	return &sdf.ManualWatermarkEstimator{}
}

func (*ticksFn) ProcessElement(_ context.Context, we *sdf.ManualWatermarkEstimator, rt *sdf.LockRTracker, t tickSpec, emit func(beam.EventTime, int64)) (sdf.ProcessContinuation, error) {
	i := rt.GetRestriction().(offsetrange.Restriction).Start
	for ; !t.at(i).After(time.Now()); i++ {
		if !rt.TryClaim(i) {
			return sdf.StopProcessing(), rt.GetError()
		}
		emit(mtime.FromTime(t.at(i)), i)
	}
	if rt.IsDone() {
		return sdf.StopProcessing(), rt.GetError()
	}
	we.UpdateWatermark(t.at(i)) // no tick before the next one comes
	return sdf.ResumeProcessingIn(time.Until(t.at(i))), nil
}

func init() {
	register.DoFn5x2[context.Context, *sdf.ManualWatermarkEstimator, *sdf.LockRTracker, tickSpec,
		func(beam.EventTime, int64), sdf.ProcessContinuation, error](&ticksFn{})
	register.Emitter2[beam.EventTime, int64]()
	beam.RegisterType(reflect.TypeOf(tickSpec{}))
}

package kafkaio

import (
	"context"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/rtrackers/offsetrange"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/beamdedup/beamdedup/internal/unbounded"
)

// watchFn is the partition watch of WatchPartitions, in place of listFn:
// a splittable DoFn whose restriction is the partition numbers still to be
// found, [next, ∞) (Kafka numbers a topic's partitions 0, 1, ... and only
// adds), so that a runner checkpoints which partitions were handed out.
// Each round it emits the partitions it has not yet emitted, then
// checkpoints until the next round. The first round starts each partition
// as Read's start options say; a partition found later starts at the
// group's committed offset, else at its first: its records were all
// written after the job started reading.
type watchFn struct {
	Brokers    string
	Topic      string
	Group      string
	Start      int
	StartAtMs  int64
	IntervalMs int64
	Reading    unbounded.Reading

	adm           *kadm.Client
	controlWarned bool
}

func (fn *watchFn) Setup() error {
	var err error
	fn.adm, err = adminFor(fn.Brokers)
	return err
}

func (fn *watchFn) CreateInitialRestriction(_ []byte) offsetrange.Restriction {
	return offsetrange.Restriction{Start: 0, End: math.MaxInt64}
}

func (fn *watchFn) SplitRestriction(_ []byte, r offsetrange.Restriction) []offsetrange.Restriction {
	return []offsetrange.Restriction{r}
}

func (fn *watchFn) RestrictionSize(_ []byte, _ offsetrange.Restriction) float64 { return 1 }

func (fn *watchFn) CreateTracker(r offsetrange.Restriction) *sdf.LockRTracker {
	return sdf.NewLockRTracker(offsetrange.NewTracker(r))
}

func (fn *watchFn) InitialWatermarkEstimatorState(et beam.EventTime, _ offsetrange.Restriction, _ []byte) int64 {
	return int64(et)
}

func (fn *watchFn) CreateWatermarkEstimator(ms int64) *unbounded.Watermark {
	return unbounded.NewWatermark(ms)
}

func (fn *watchFn) WatermarkEstimatorState(w *unbounded.Watermark) int64 { return w.State() }

// ProcessElement runs one round of the watch.
func (fn *watchFn) ProcessElement(ctx context.Context, we *unbounded.Watermark, rt *sdf.LockRTracker, _ []byte,
	emit func(beam.EventTime, partition)) (sdf.ProcessContinuation, error) {
	next := rt.GetRestriction().(offsetrange.Restriction).Start
	w := watchOf(fn.Reading.RunID)
	// With IdleStop, ended once every reader it handed out here ended and
	// no partition came for IdleStop.
	ctl := unbounded.LookupControl(ctx, fn.Reading.Control, "topic "+fn.Topic, &fn.controlWarned)
	idle := fn.Reading.IdleStopAfter()
	if ctl.Requested() || (idle > 0 && next > 0 && w.idle(next, idle)) {
		finish(rt)
		return sdf.StopProcessing(), nil
	}
	from, atMs := start(fn.Start), fn.StartAtMs
	if next > 0 {
		from, atMs = fromEarliest, 0
		if fn.Group != "" {
			from = fromCommitted
		}
	}
	starts, err := startOffsets(ctx, fn.adm, fn.Brokers, fn.Topic, fn.Group, from, atMs)
	if err != nil {
		if next == 0 {
			return nil, err // as listFn: a topic that is not there fails the job
		}
		// A broker that does not answer now: look again next round.
		log.Warnf(ctx, "kafkaio: watching the partitions of topic %s on %s: %v (looked again in %v)", fn.Topic, fn.Brokers, err, fn.interval())
		return sdf.ResumeProcessingIn(fn.interval()), nil
	}
	ps := make([]int32, 0, len(starts))
	for p := range starts {
		if int64(p) >= next {
			ps = append(ps, p)
		}
	}
	slices.Sort(ps)
	for _, p := range ps {
		if !rt.TryClaim(int64(p)) {
			return sdf.StopProcessing(), nil
		}
		w.emitted(int64(p) + 1)
		// At the minimum time, as listFn's Impulse.
		emit(beam.EventTime(mtime.MinTimestamp), partition{Topic: fn.Topic, Partition: p, Start: starts[p]})
	}
	we.UpdateWatermark(time.Now().Add(-fn.Reading.Lag()))
	return sdf.ResumeProcessingIn(fn.interval()), nil
}

func (fn *watchFn) interval() time.Duration { return time.Duration(fn.IntervalMs) * time.Millisecond }

// A watch is what a Read's watch and readers share in this process: how
// many partitions the watch handed out, how many of their readers ended,
// and when the last partition was found.
type watch struct {
	mu      sync.Mutex
	handed  int64
	ended   int64
	changed time.Time
}

var watches sync.Map // RunID -> *watch

func watchOf(runID string) *watch {
	v, _ := watches.LoadOrStore(runID, &watch{changed: time.Now()})
	return v.(*watch)
}

func (w *watch) emitted(n int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n > w.handed {
		w.handed, w.changed = n, time.Now()
	}
}

func (w *watch) readerEnded() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ended++
}

// idle reports whether every handed partition's reader ended here and
// none was found for d.
func (w *watch) idle(handed int64, d time.Duration) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ended >= handed && time.Since(w.changed) >= d
}

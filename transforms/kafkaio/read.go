package kafkaio

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"reflect"
	"syscall"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/rtrackers/offsetrange"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/beamdedup/beamdedup/internal/unbounded"
)

func init() {
	beam.RegisterType(reflect.TypeFor[partition]())
}

// Read returns a PCollection<Record> of the records of topic on brokers
// (host:port, comma-separated), each stamped with its record timestamp.
// It is unbounded: one reader per partition, a splittable DoFn whose
// restriction is the partition's offset range, so a runner checkpoints
// where each partition is and can split it. The partitions are listed
// when the job starts, and with WatchPartitions again while it runs.
//
// Read commits nothing itself. With Group, each Record is committed for
// the group once the pipeline marks it safe with Commit (after its
// write, its dead letter, or where a dedup step drops it), and only once
// every record before it in its partition is: see the package doc. It
// panics on invalid options; TryRead returns the error instead.
func Read(s beam.Scope, brokers, topic string, opts ...Option) beam.PCollection {
	col, err := TryRead(s, brokers, topic, opts...)
	if err != nil {
		panic(err)
	}
	return col
}

// TryRead is Read returning construction errors.
func TryRead(s beam.Scope, brokers, topic string, opts ...Option) (beam.PCollection, error) {
	cfg, err := newConfig("kafkaio.Read", readOptions, opts, checkBrokers(brokers), checkTopic(topic))
	if err != nil {
		return beam.PCollection{}, err
	}
	s = s.Scope("kafkaio.Read")
	runID := cfg.stopID
	if runID == "" {
		var b [8]byte
		rand.Read(b[:])
		runID = "read-" + hex.EncodeToString(b[:])
	}
	var startAtMs int64
	if !cfg.startAt.IsZero() {
		startAtMs = cfg.startAt.UnixMilli()
	}
	var list any = &listFn{Brokers: brokers, Topic: topic, Group: cfg.group, Start: int(cfg.start), StartAtMs: startAtMs}
	if cfg.watch > 0 {
		list = &watchFn{Brokers: brokers, Topic: topic, Group: cfg.group, Start: int(cfg.start), StartAtMs: startAtMs,
			IntervalMs: cfg.watch.Milliseconds(), IdleStopMs: cfg.idleStop.Milliseconds(), LagMs: cfg.watermarkLag.Milliseconds(),
			RunID: runID, StopID: cfg.stopID}
	}
	parts := beam.ParDo(s, list, beam.Impulse(s))
	return beam.ParDo(s, &readFn{
		Brokers: brokers, Topic: topic, Group: cfg.group, RunID: runID, StopID: cfg.stopID,
		MaxBundleMs: cfg.maxBundle.Milliseconds(), MaxBundleRecords: cfg.maxRecords,
		IdleStopMs: cfg.idleStop.Milliseconds(), WatermarkLagMs: cfg.watermarkLag.Milliseconds(),
		CommitIntervalMs: cfg.commitInterval.Milliseconds(), MaxInFlight: cfg.maxInFlight, Watched: cfg.watch > 0,
	}, parts), nil
}

// partition is a reader's element: a partition and where it starts.
type partition struct {
	Topic     string
	Partition int32
	Start     int64
}

// listFn lists the topic's partitions and where each starts, once, when
// the job starts.
type listFn struct {
	Brokers   string
	Topic     string
	Group     string
	Start     int   // a Start
	StartAtMs int64 // StartAt, when not 0

	adm *kadm.Client
}

func (fn *listFn) Setup() error {
	var err error
	fn.adm, err = adminFor(fn.Brokers)
	return err
}

func (fn *listFn) ProcessElement(ctx context.Context, _ []byte, emit func(partition)) error {
	starts, err := startOffsets(ctx, fn.adm, fn.Brokers, fn.Topic, fn.Group, Start(fn.Start), fn.StartAtMs)
	if err != nil {
		return err
	}
	for p, o := range starts {
		emit(partition{Topic: fn.Topic, Partition: p, Start: o})
	}
	return nil
}

// startOffsets is where each partition of topic starts.
func startOffsets(ctx context.Context, adm *kadm.Client, brokers, topic, group string, start Start, atMs int64) (map[int32]int64, error) {
	where := fmt.Sprintf("topic %s on %s", topic, brokers)
	list := func(f func(context.Context, ...string) (kadm.ListedOffsets, error)) (map[int32]int64, error) {
		l, err := f(ctx, topic)
		if err == nil {
			err = l.Error()
		}
		if errors.Is(err, kerr.UnknownTopicOrPartition) {
			return nil, fmt.Errorf("kafkaio: %s does not exist", where)
		}
		if err != nil {
			return nil, fmt.Errorf("kafkaio: listing the offsets of %s: %w", where, err)
		}
		out := map[int32]int64{}
		for p, o := range l[topic] {
			out[p] = o.Offset
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("kafkaio: %s does not exist", where)
		}
		return out, nil
	}
	if atMs != 0 {
		return list(func(ctx context.Context, t ...string) (kadm.ListedOffsets, error) {
			return adm.ListOffsetsAfterMilli(ctx, atMs, t...)
		})
	}
	switch start {
	case FromLatest:
		return list(adm.ListEndOffsets)
	case FromEarliest:
		return list(adm.ListStartOffsets)
	}
	earliest, err := list(adm.ListStartOffsets)
	if err != nil {
		return nil, err
	}
	var resp kadm.OffsetResponses
	err = retry(ctx, func() error {
		var err error
		resp, err = adm.FetchOffsets(ctx, group)
		if err == nil {
			err = resp.Error()
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("kafkaio: fetching the committed offsets of group %s on %s: %w", group, brokers, err)
	}
	for p, o := range resp[topic] {
		first, ok := earliest[p]
		if !ok || o.At < 0 {
			continue
		}
		if o.At < first {
			// Retention deleted records the group had not committed: they
			// are gone before anyone read them.
			log.Warnf(ctx, "kafkaio: group %s committed offset %d of %s partition %d, which starts at %d now: %d records were deleted (retention) before the group read them",
				group, o.At, topic, p, first, first-o.At)
		}
		earliest[p] = max(o.At, first)
	}
	return earliest, nil
}

// readFn is the splittable DoFn of a partition's reader. Fields are
// exported so the runner can serialize the DoFn.
type readFn struct {
	Brokers          string
	Topic            string
	Group            string
	RunID            string // names this Read's run (ledger.go)
	StopID           string // names the Stopper in the submitting process
	MaxBundleMs      int64
	MaxBundleRecords int
	IdleStopMs       int64
	WatermarkLagMs   int64
	CommitIntervalMs int64
	MaxInFlight      int  // with Group: records read ahead of the safe offset, at most (0: no bound)
	Watched          bool // its partitions come from a watch (WatchPartitions), told when it ends

	adm               *kadm.Client
	stopMissingWarned bool
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

// pollBatch bounds the records one poll returns.
const pollBatch = 1000

// inFlightPause is how long a reader held at MaxInFlight waits before its
// next bundle looks again.
const inFlightPause = 50 * time.Millisecond

// ProcessElement runs one bundle of a partition's reader: poll and emit
// until the bundle's time or record budget is spent, then checkpoint.
func (fn *readFn) ProcessElement(ctx context.Context, we *unbounded.Watermark, rt *sdf.LockRTracker, p partition,
	emit func(beam.EventTime, Record)) (sdf.ProcessContinuation, error) {
	tr := rt.Rt.(*tracker)
	start := rt.GetRestriction().(offsetrange.Restriction).Start
	r, err := runFor(fn)
	if err != nil {
		return nil, err
	}
	if r != nil {
		r.started(p.Partition, start)
	}
	pr, err := acquireReader(fn.Brokers, fn.Topic, p.Partition, start)
	if err != nil {
		return nil, fmt.Errorf("kafkaio: a reader of topic %s partition %d on %s: %w", fn.Topic, p.Partition, fn.Brokers, err)
	}
	keep := true
	defer func() {
		if keep {
			releaseReader(pr)
		} else {
			discardReader(pr)
		}
	}()
	stp := fn.stopper(ctx)
	read := 0
	defer func() { cRead.Inc(ctx, int64(read)) }()
	stop := func() (sdf.ProcessContinuation, error) {
		// What was emitted commits with this bundle; the partition is done.
		finish(rt)
		if stp != nil {
			stp.ended.Add(1)
		}
		if fn.Watched {
			watchOf(fn.RunID).readerEnded()
		}
		keep = false
		return sdf.StopProcessing(), nil
	}
	lag := time.Duration(fn.WatermarkLagMs) * time.Millisecond
	idleStop := time.Duration(fn.IdleStopMs) * time.Millisecond
	deadline := time.Now().Add(time.Duration(fn.MaxBundleMs) * time.Millisecond)
	for read < fn.MaxBundleRecords && time.Now().Before(deadline) {
		if stp != nil && stp.Requested() {
			return stop()
		}
		want := min(pollBatch, fn.MaxBundleRecords-read)
		if r != nil && fn.MaxInFlight > 0 {
			room := r.room(ctx, p.Partition, pr.next, fn.MaxInFlight)
			if room <= 0 {
				// Held: end the bundle, so that the runner passes on what
				// it emitted and those records can become safe.
				return sdf.ResumeProcessingIn(inFlightPause), nil
			}
			want = min(want, room)
		}
		pctx, cancel := context.WithDeadline(ctx, deadline)
		fetches := pr.cl.PollRecords(pctx, want)
		cancel()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err := fetchError(fetches); err != nil {
			// A broker restarting, a leader moving: kgo retries. Past
			// failTimeout the job fails, naming the topic and the
			// brokers, rather than wait silently.
			if pr.failing.IsZero() {
				pr.failing = time.Now()
			}
			if !retriable(err) || time.Since(pr.failing) >= failTimeout {
				keep = false
				return nil, fmt.Errorf("kafkaio: reading topic %s partition %d on %s failed (for %v): %w; a rerun reads on from the group's committed offsets",
					fn.Topic, p.Partition, fn.Brokers, time.Since(pr.failing).Round(time.Second), err)
			}
			continue
		}
		pr.failing = time.Time{}
		fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
			if fp.HighWatermark > 0 {
				pr.hwm.Store(fp.HighWatermark)
			}
		})
		recs := fetches.Records()
		if len(recs) == 0 {
			if fn.caughtUp(ctx, pr) {
				we.UpdateWatermark(time.Now().Add(-lag))
				if idleStop > 0 && time.Since(pr.lastData) >= idleStop {
					return stop()
				}
			}
			continue
		}
		pr.lastData = time.Now()
		var newest time.Time
		for _, kr := range recs {
			if kr.Offset < pr.next {
				continue // fetched before a reset; not this range's
			}
			if !rt.TryClaim(kr.Offset) {
				// The range ends here (a split): what follows is another
				// reader's, and this client is past it.
				keep = false
				if rt.IsDone() {
					return sdf.StopProcessing(), nil
				}
				return nil, fmt.Errorf("kafkaio: claiming offset %d of topic %s partition %d: %v", kr.Offset, fn.Topic, p.Partition, rt.GetError())
			}
			if r != nil && kr.Offset > pr.next {
				r.markSafe(p.Partition, pr.next, kr.Offset) // passed over: no record there for us
			}
			pr.next = kr.Offset + 1
			if kr.Timestamp.After(newest) {
				newest = kr.Timestamp
			}
			read++
			if stp != nil {
				stp.claimed.Add(1) // before emit, which may block in fused steps
			}
			emit(mtime.FromTime(kr.Timestamp), fromKgo(kr))
		}
		if wm := newest.Add(-lag); !newest.IsZero() {
			we.UpdateWatermark(wm)
		}
		tr.end.Store(max(pr.hwm.Load(), pr.next))
		if fn.caughtUp(ctx, pr) {
			we.UpdateWatermark(time.Now().Add(-lag))
		}
	}
	return sdf.ResumeProcessingIn(0), nil
}

// caughtUp reports whether the reader has read to the partition's end, as
// last seen; with no fetch to say, it lists the end offset, at most once a
// second. A broker that does not answer is not caught up.
func (fn *readFn) caughtUp(ctx context.Context, pr *partReader) bool {
	if hwm := pr.hwm.Load(); hwm >= 0 && pr.next >= hwm {
		return true
	}
	if time.Since(pr.lastCheck) < time.Second {
		return false
	}
	pr.lastCheck = time.Now()
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	l, err := fn.adm.ListEndOffsets(lctx, fn.Topic)
	if err != nil {
		return false
	}
	if o, ok := l.Lookup(fn.Topic, pr.partition); ok && o.Err == nil {
		pr.hwm.Store(o.Offset)
		return pr.next >= o.Offset
	}
	return false
}

// retry calls f until it returns nil or an error Kafka does not call
// retriable (a group coordinator that is still loading, say), at most for
// 30s or ctx's deadline.
func retry(ctx context.Context, f func() error) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := f()
		if err == nil || !kerr.IsRetriable(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// failTimeout is how long a reader's fetches may fail with errors Kafka
// calls retriable (a restarting broker, a topic deleted under it) before
// the reader fails its bundle.
const failTimeout = 30 * time.Second

// retriable reports whether a fetch may succeed if tried again: a network
// error, or a Kafka error marked retriable.
func retriable(err error) bool {
	var ne net.Error
	return kerr.IsRetriable(err) || errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNREFUSED)
}

// fetchError is the first error of a poll that is not its own deadline.
func fetchError(fs kgo.Fetches) error {
	for _, e := range fs.Errors() {
		if errors.Is(e.Err, context.DeadlineExceeded) || errors.Is(e.Err, context.Canceled) {
			continue
		}
		return e.Err
	}
	return nil
}

package pubsubio

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	pubsub "cloud.google.com/go/pubsub/v2/apiv1"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func init() {
	register.DoFn5x2[context.Context, *WatermarkEstimator, *sdf.LockRTracker, int,
		func(beam.EventTime, Message), sdf.ProcessContinuation, error](&readFn{})
	register.Emitter2[beam.EventTime, Message]()
}

// Counters of the source, under the "pubsubio" namespace.
var (
	messagesRead    = beam.NewCounter("pubsubio", "messages_read")
	messagesAcked   = beam.NewCounter("pubsubio", "messages_acked")
	messagesNacked  = beam.NewCounter("pubsubio", "messages_nacked")
	leaseExtensions = beam.NewCounter("pubsubio", "lease_extensions")
)

// ackChunk bounds the ids per Acknowledge/ModifyAckDeadline request (Pub/Sub
// limits a request to 512 KB).
const ackChunk = 1000

// Read returns a PCollection<Message> of the messages of subscription, a full
// name projects/P/subscriptions/S. It panics on invalid options; TryRead
// returns the error instead.
func Read(s beam.Scope, subscription string, opts ...ReadOption) beam.PCollection {
	col, err := TryRead(s, subscription, opts...)
	if err != nil {
		panic(err)
	}
	return col
}

// TryRead is Read returning construction errors.
func TryRead(s beam.Scope, subscription string, opts ...ReadOption) (beam.PCollection, error) {
	cfg, err := newReadConfig(subscription, opts)
	if err != nil {
		return beam.PCollection{}, err
	}
	s = s.Scope("pubsubio.Read")
	readers := make([]int, cfg.Readers)
	for i := range readers {
		readers[i] = i
	}
	return beam.ParDo(s, newReadFn(subscription, cfg), beam.CreateList(s, readers)), nil
}

// readFn is the splittable DoFn of one reader; its element is the reader's
// index. Fields are exported so the runner can serialize the DoFn.
type readFn struct {
	Subscription       string
	Endpoint           string
	IDAttribute        string
	TimestampAttribute string
	AckDeadlineMs      int64
	MaxBundleMs        int64
	MaxBundleMessages  int
	PullBatch          int
	IdleStopMs         int64
	WatermarkLagMs     int64
	// DisableLease turns off lease extension; tests use it to show the
	// redelivery that leasing prevents.
	DisableLease bool
	// StopID names the Stopper in the submitting process (StopWith).
	StopID string

	sub               *pubsub.SubscriptionAdminClient
	stopMissingWarned bool
}

func newReadFn(subscription string, c readConfig) *readFn {
	return &readFn{
		Subscription:       subscription,
		Endpoint:           c.Endpoint,
		IDAttribute:        c.IDAttribute,
		TimestampAttribute: c.TimestampAttribute,
		AckDeadlineMs:      c.AckDeadline.Milliseconds(),
		MaxBundleMs:        c.MaxBundleDuration.Milliseconds(),
		MaxBundleMessages:  c.MaxBundleMessages,
		PullBatch:          c.PullBatch,
		IdleStopMs:         c.IdleStop.Milliseconds(),
		WatermarkLagMs:     c.WatermarkLag.Milliseconds(),
		DisableLease:       c.disableLease,
		StopID:             c.StopID,
	}
}

func (fn *readFn) Setup(ctx context.Context) error {
	c, err := subscriberClient(ctx, fn.Endpoint)
	if err != nil {
		return fmt.Errorf("pubsubio: dialing Pub/Sub: %w", err)
	}
	fn.sub = c
	return nil
}

// CreateInitialRestriction returns an empty restriction. AckIDs is never
// nil: the Go SDK encodes a nil slice of a schema row as a null field,
// which Beam Java's row coder cannot read back, and a Java runner (Flink)
// decodes the restriction between stages (docs/runners.md).
func (fn *readFn) CreateInitialRestriction(_ int) Restriction { return Restriction{AckIDs: []string{}} }

func (fn *readFn) SplitRestriction(_ int, r Restriction) []Restriction { return []Restriction{r} }

func (fn *readFn) RestrictionSize(_ int, _ Restriction) float64 { return 1 }

func (fn *readFn) CreateTracker(r Restriction) *sdf.LockRTracker {
	return sdf.NewLockRTracker(newTracker(r, time.Now()))
}

func (fn *readFn) InitialWatermarkEstimatorState(et beam.EventTime, _ Restriction, _ int) int64 {
	return int64(et)
}

func (fn *readFn) CreateWatermarkEstimator(ms int64) *WatermarkEstimator {
	we := &WatermarkEstimator{}
	we.ms.Store(ms)
	return we
}

func (fn *readFn) WatermarkEstimatorState(we *WatermarkEstimator) int64 {
	return we.ms.Load()
}

func (fn *readFn) ackDeadline() time.Duration {
	return time.Duration(fn.AckDeadlineMs) * time.Millisecond
}

// ProcessElement runs one bundle of a reader: ack what the previous
// (committed) bundle claimed, pull and emit until the bundle's time or
// message budget is spent, then checkpoint so that the residual carries this
// bundle's ack ids.
func (fn *readFn) ProcessElement(ctx context.Context, we *WatermarkEstimator, rt *sdf.LockRTracker, _ int,
	emit func(beam.EventTime, Message)) (sdf.ProcessContinuation, error) {
	tr := rt.Rt.(*tracker)
	rest := tr.GetRestriction().(Restriction)
	if err := fn.ack(ctx, rest.AckIDs); err != nil {
		return nil, err
	}
	messagesAcked.Inc(ctx, int64(len(rest.AckIDs)))
	stp := fn.stopper(ctx)
	if stp != nil {
		stp.acked.Add(int64(len(rest.AckIDs)))
		if stp.Requested() {
			// The carried ids are acked and nothing more is pulled: done.
			tr.stop()
			stp.ended.Add(1)
			return sdf.StopProcessing(), nil
		}
	}

	lease := fn.startLease(ctx)
	defer lease.stop(ctx) // idempotent; the normal paths stop it explicitly

	lag := time.Duration(fn.WatermarkLagMs) * time.Millisecond
	idleStop := time.Duration(fn.IdleStopMs) * time.Millisecond
	deadline := time.Now().Add(time.Duration(fn.MaxBundleMs) * time.Millisecond)
	claimed := 0
	for claimed < fn.MaxBundleMessages && time.Now().Before(deadline) && !(stp != nil && stp.Requested()) {
		msgs, err := fn.pull(ctx, deadline, min(fn.PullBatch, fn.MaxBundleMessages-claimed))
		if errors.Is(err, errNoAnswer) {
			// Not evidence of an empty subscription (a loaded server or
			// fake can be that slow with a backlog): no IdleStop on it.
			continue
		}
		if err != nil {
			return nil, err
		}
		if len(msgs) == 0 {
			if claimed == 0 {
				if idleStop > 0 && time.Since(tr.lastActivityTime()) >= idleStop {
					// Nothing claimed in this bundle and the carried ids are acked: done.
					lease.stop(ctx)
					tr.stop()
					if stp != nil {
						stp.ended.Add(1) // this reader returned StopProcessing
					}
					return sdf.StopProcessing(), nil
				}
				// Idle and nothing in flight from this bundle: let event time move on.
				we.UpdateWatermark(time.Now().Add(-lag))
			}
			continue
		}
		// Lease the whole batch now (the subscription's own deadline may be
		// short) and keep leasing it: emit may block on slow fused steps
		// before later messages of the batch are even claimed.
		lease.add(ctx, ackIDs(msgs))
		var oldest time.Time
		for i, rm := range msgs {
			if !rt.TryClaim(rm.GetAckId()) {
				// A runner split took over the restriction; the residual owes
				// the acks of what was claimed. Hand the rest back at once.
				messagesRead.Inc(ctx, int64(i)) // the claimed part of the batch
				unclaimed := ackIDs(msgs[i:])
				lease.remove(len(unclaimed))
				fn.modify(ctx, unclaimed, 0)
				messagesNacked.Inc(ctx, int64(len(unclaimed)))
				lease.stop(ctx)
				return sdf.StopProcessing(), nil
			}
			m := fromReceived(rm.GetMessage(), fn.IDAttribute)
			ts := eventTime(m, fn.TimestampAttribute)
			if i == 0 || ts.Before(oldest) {
				oldest = ts
			}
			if stp != nil {
				stp.claimed.Add(1) // before emit, which may block in fused steps
			}
			emit(mtime.FromTime(ts), m)
			claimed++
		}
		messagesRead.Inc(ctx, int64(len(msgs)))
		// Heuristic watermark: Pub/Sub has no order, so follow the oldest
		// timestamp of the latest batch, never ahead of wall time minus lag.
		if wm := time.Now().Add(-lag); oldest.Before(wm) {
			we.UpdateWatermark(oldest)
		} else {
			we.UpdateWatermark(wm)
		}
	}
	lease.stop(ctx)
	leaseExtensions.Inc(ctx, lease.count.Load())
	return sdf.ResumeProcessingIn(0), nil
}

// pull returns at most n messages. It gives the server until the bundle
// deadline plus a grace period: a Pull cancelled by the client after the
// server has handed out messages loses them until their ack deadline
// expires (measured with pstest: a whole 1000-message batch lost to a 100ms
// client timeout), so the client never cuts a pull short on purpose.
func (fn *readFn) pull(ctx context.Context, deadline time.Time, n int) ([]*pubsubpb.ReceivedMessage, error) {
	pctx, cancel := context.WithTimeout(ctx, max64(time.Until(deadline), 0)+pullGrace)
	defer cancel()
	resp, err := fn.sub.Pull(pctx, &pubsubpb.PullRequest{Subscription: fn.Subscription, MaxMessages: int32(n)})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if pctx.Err() != nil || status.Code(err) == codes.DeadlineExceeded {
			return nil, errNoAnswer
		}
		return nil, fmt.Errorf("pubsubio: pull %s: %w", fn.Subscription, err)
	}
	return resp.GetReceivedMessages(), nil
}

// errNoAnswer: a Pull ran out of time without the server answering.
var errNoAnswer = errors.New("pubsubio: pull not answered in time")

// pullGrace is how long a Pull may outlast the bundle deadline.
const pullGrace = 10 * time.Second

func max64(a, b time.Duration) time.Duration {
	if a > b {
		return a
	}
	return b
}

func ackIDs(msgs []*pubsubpb.ReceivedMessage) []string {
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.GetAckId()
	}
	return ids
}

// ack acknowledges ids. An id whose lease expired is rejected by
// exactly-once subscriptions and ignored by others; its message was or will
// be redelivered and deduplicated downstream, so that is not a failure. Any
// other error (after the client's retries) is an infrastructure failure.
func (fn *readFn) ack(ctx context.Context, ids []string) error {
	for len(ids) > 0 {
		n := min(len(ids), ackChunk)
		err := fn.sub.Acknowledge(ctx, &pubsubpb.AcknowledgeRequest{Subscription: fn.Subscription, AckIds: ids[:n]})
		if err != nil {
			switch status.Code(err) {
			case codes.InvalidArgument, codes.FailedPrecondition:
				log.Warnf(ctx, "pubsubio: ack of %d ids on %s rejected (leases expired?): %v", n, fn.Subscription, err)
			default:
				return fmt.Errorf("pubsubio: ack on %s: %w", fn.Subscription, err)
			}
		}
		ids = ids[n:]
	}
	return nil
}

// modify sets the ack deadline of ids (0 nacks them). Failures only cost a
// redelivery, so they are logged.
func (fn *readFn) modify(ctx context.Context, ids []string, d time.Duration) {
	for len(ids) > 0 {
		n := min(len(ids), ackChunk)
		err := fn.sub.ModifyAckDeadline(ctx, &pubsubpb.ModifyAckDeadlineRequest{
			Subscription: fn.Subscription, AckIds: ids[:n], AckDeadlineSeconds: int32(math.Ceil(d.Seconds())),
		})
		if err != nil && !errors.Is(err, context.Canceled) {
			log.Warnf(ctx, "pubsubio: modifyAckDeadline of %d ids on %s: %v", n, fn.Subscription, err)
		}
		ids = ids[n:]
	}
}

// leaser extends the leases of the bundle's pulled messages every third of
// the ack deadline while the bundle runs, and once more when it stops, so
// the lease covers the time until the residual acks them.
type leaser struct {
	fn       *readFn
	mu       sync.Mutex
	ids      []string // pulled in this bundle, in pull order
	quit     chan struct{}
	finished chan struct{}
	once     sync.Once
	count    atomic.Int64
}

func (fn *readFn) startLease(ctx context.Context) *leaser {
	l := &leaser{fn: fn, quit: make(chan struct{}), finished: make(chan struct{})}
	if fn.DisableLease {
		close(l.finished)
		return l
	}
	every := max64(fn.ackDeadline()/3, 100*time.Millisecond)
	lctx := context.WithoutCancel(ctx)
	go func() {
		defer close(l.finished)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-l.quit:
				return
			case <-t.C:
				l.extend(lctx, l.snapshot())
			}
		}
	}()
	return l
}

// add leases ids now and from then on.
func (l *leaser) add(ctx context.Context, ids []string) {
	l.mu.Lock()
	l.ids = append(l.ids, ids...)
	l.mu.Unlock()
	l.extend(ctx, ids)
}

// remove drops the last n ids (handed back unclaimed).
func (l *leaser) remove(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ids = l.ids[:len(l.ids)-n]
}

func (l *leaser) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.ids...)
}

func (l *leaser) extend(ctx context.Context, ids []string) {
	if l.fn.DisableLease || len(ids) == 0 {
		return
	}
	l.fn.modify(ctx, ids, l.fn.ackDeadline())
	l.count.Add(1)
}

func (l *leaser) stop(ctx context.Context) {
	l.once.Do(func() {
		close(l.quit)
		<-l.finished
		l.extend(ctx, l.snapshot())
	})
}

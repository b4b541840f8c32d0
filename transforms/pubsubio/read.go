package pubsubio

import (
	"context"
	"errors"
	"fmt"
	"math"
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

	"github.com/beamdedup/beamdedup/internal/pubsubadmin"
	"github.com/beamdedup/beamdedup/internal/unbounded"
)

func init() {
	register.DoFn5x2[context.Context, *unbounded.Watermark, *sdf.LockRTracker, int,
		func(beam.EventTime, Message), sdf.ProcessContinuation, error](&readFn{})
	register.Emitter2[beam.EventTime, Message]()
}

// ackChunk bounds the ids per Acknowledge/ModifyAckDeadline request (at
// most 512 KB).
const ackChunk = 1000

// Read returns a PCollection<Message> of the messages of subscription,
// projects/P/subscriptions/S. It acknowledges nothing: the pipeline acks
// a message with Ack once what it made of it is safe, and until then the
// message stays leased (see the package doc). It panics on invalid
// options; TryRead returns the error instead.
func Read(s beam.Scope, subscription string, opts ...Option) beam.PCollection {
	col, err := TryRead(s, subscription, opts...)
	if err != nil {
		panic(err)
	}
	return col
}

// TryRead is Read returning construction errors.
func TryRead(s beam.Scope, subscription string, opts ...Option) (beam.PCollection, error) {
	cfg, err := newConfig("pubsubio.Read", readOptions, opts, pubsubadmin.CheckName(subscription, pubsubadmin.Subscriptions))
	if err != nil {
		return beam.PCollection{}, err
	}
	s = s.Scope("pubsubio.Read")
	readers := make([]int, cfg.readers)
	for i := range readers {
		readers[i] = i
	}
	fn := &readFn{Subscription: subscription, Endpoint: cfg.endpoint, IDAttribute: cfg.idAttribute,
		TimestampAttribute: cfg.timestampAttribute, AckDeadlineMs: cfg.ackDeadline.Milliseconds(),
		Reading: cfg.Reading(), DisableLease: cfg.disableLease}
	return beam.ParDo(s, fn, beam.CreateList(s, readers)), nil
}

// readFn is the splittable DoFn of one reader; its element is the reader's
// index.
type readFn struct {
	Subscription       string
	Endpoint           string
	IDAttribute        string
	TimestampAttribute string
	AckDeadlineMs      int64
	Reading            unbounded.Reading
	DisableLease       bool

	sub           *pubsub.SubscriptionAdminClient
	controlWarned bool
}

func (fn *readFn) Setup(ctx context.Context) error {
	var err error
	fn.sub, err = pubsubadmin.Subscriber(ctx, fn.Endpoint)
	return err
}

func (fn *readFn) CreateInitialRestriction(_ int) restriction { return restriction{} }

func (fn *readFn) SplitRestriction(_ int, r restriction) []restriction { return []restriction{r} }

func (fn *readFn) RestrictionSize(_ int, _ restriction) float64 { return 1 }

func (fn *readFn) CreateTracker(r restriction) *sdf.LockRTracker {
	return sdf.NewLockRTracker(newTracker(r, time.Now()))
}

func (fn *readFn) InitialWatermarkEstimatorState(et beam.EventTime, _ restriction, _ int) int64 {
	return int64(et)
}

func (fn *readFn) CreateWatermarkEstimator(ms int64) *unbounded.Watermark {
	return unbounded.NewWatermark(ms)
}

func (fn *readFn) WatermarkEstimatorState(we *unbounded.Watermark) int64 {
	return we.State()
}

func (fn *readFn) ackDeadline() time.Duration {
	return time.Duration(fn.AckDeadlineMs) * time.Millisecond
}

// pullBatch bounds the messages one Pull asks for.
const pullBatch = 1000

// ProcessElement runs one bundle of a reader: pull and emit until the
// bundle's time or message budget is spent, then checkpoint.
func (fn *readFn) ProcessElement(ctx context.Context, we *unbounded.Watermark, rt *sdf.LockRTracker, _ int,
	emit func(beam.EventTime, Message)) (sdf.ProcessContinuation, error) {
	tr := rt.Rt.(*tracker)
	r := runFor(ctx, fn)
	b := fn.Reading.Start(ctx, we, fn.Subscription, &fn.controlWarned)
	absorbed := 0
	defer func() {
		cRead.Inc(ctx, int64(b.Emitted()))
		cAbsorbed.Inc(ctx, int64(absorbed))
		cLeaseExtensions.Inc(ctx, r.extensions.Swap(0))
	}()
	stop := func() (sdf.ProcessContinuation, error) {
		tr.stop()
		b.Ended()
		return sdf.StopProcessing(), nil
	}
	for b.More() {
		if b.StopRequested() {
			return stop()
		}
		b.Control().Polling()
		msgs, err := fn.pull(ctx, b.Deadline(), min(pullBatch, b.Left()))
		b.Control().Polled(!errors.Is(err, errNoAnswer))
		if errors.Is(err, errNoAnswer) {
			continue // a loaded server can be that slow with a backlog: not idle
		}
		if err != nil {
			return nil, err
		}
		if len(msgs) == 0 {
			if b.Spent() == 0 {
				if b.Idle(tr.lastActivityTime()) {
					return stop()
				}
				b.CaughtUp()
			}
			continue
		}
		n, split := fn.take(ctx, b, r, rt, msgs, emit)
		absorbed += n
		if split {
			return sdf.StopProcessing(), nil
		}
	}
	return sdf.ResumeProcessingIn(0), nil
}

// take leases, claims and holds a batch of pulled messages, emits those
// that are not redeliveries of a message in flight (absorbed), and moves
// the watermark. It reports split when a split ended the restriction: the
// rest of the batch is handed back.
func (fn *readFn) take(ctx context.Context, b *unbounded.Bundle, r *run, rt *sdf.LockRTracker, msgs []*pubsubpb.ReceivedMessage,
	emit func(beam.EventTime, Message)) (absorbed int, split bool) {
	// Lease the whole batch now: emit may take longer than the
	// subscription's deadline to come back from fused steps.
	if !fn.DisableLease {
		warnModify(ctx, modifyDeadline(ctx, fn.sub, fn.Subscription, ackIDs(msgs), fn.ackDeadline()))
		r.extensions.Add(1)
	}
	// Claim and hold the whole batch before emitting any of it: the lease
	// covers only what is held.
	fresh := make([]bool, len(msgs))
	for i, rm := range msgs {
		if !rt.TryClaim(rm.GetAckId()) {
			unclaimed := ackIDs(msgs[i:])
			warnModify(ctx, modifyDeadline(ctx, fn.sub, fn.Subscription, unclaimed, 0))
			cNacked.Inc(ctx, int64(len(unclaimed)))
			msgs, split = msgs[:i], true
			break
		}
		fresh[i] = r.hold(ctx, rm.GetMessage().GetMessageId(), rm.GetAckId())
		if !fresh[i] {
			absorbed++ // its first delivery is in flight in this run
			b.Spend(1)
		}
	}
	var oldest time.Time
	emitted := 0
	for i, rm := range msgs {
		if !fresh[i] {
			continue
		}
		m := fromReceived(rm, fn.IDAttribute)
		ts := eventTime(m, fn.TimestampAttribute)
		if emitted == 0 || ts.Before(oldest) {
			oldest = ts
		}
		emitted++
		b.Claim(1)
		emit(mtime.FromTime(ts), m)
	}
	if split {
		return absorbed, true
	}
	// Heuristic watermark: Pub/Sub has no order, so follow the oldest
	// timestamp of the latest batch, never ahead of wall time minus lag.
	if wm := time.Now().Add(-fn.Reading.Lag()); emitted > 0 && oldest.Before(wm) {
		b.Watermark(oldest)
	} else {
		b.CaughtUp()
	}
	return absorbed, false
}

// pull returns at most n messages. It gives the server until the bundle
// deadline plus pullGrace: a Pull the client cancels after the server
// handed out messages loses them until their ack deadline expires.
func (fn *readFn) pull(ctx context.Context, deadline time.Time, n int) ([]*pubsubpb.ReceivedMessage, error) {
	pctx, cancel := context.WithTimeout(ctx, max(time.Until(deadline), 0)+pullGrace)
	defer cancel()
	resp, err := fn.sub.Pull(pctx, &pubsubpb.PullRequest{Subscription: fn.Subscription, MaxMessages: int32(n)})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if pctx.Err() != nil || status.Code(err) == codes.DeadlineExceeded {
			return nil, errNoAnswer
		}
		return nil, fmt.Errorf("pubsubio: pull %s on %s: %w", fn.Subscription, pubsubadmin.Target(fn.Endpoint), err)
	}
	return resp.GetReceivedMessages(), nil
}

var errNoAnswer = errors.New("pubsubio: pull not answered in time")

// pullGrace is how long a Pull may outlast the bundle deadline.
const pullGrace = 10 * time.Second

func ackIDs(msgs []*pubsubpb.ReceivedMessage) []string {
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.GetAckId()
	}
	return ids
}

// modifyDeadline sets the ack deadline of ids (0 hands them back) and
// returns the first error.
func modifyDeadline(ctx context.Context, c *pubsub.SubscriptionAdminClient, subscription string, ids []string, d time.Duration) error {
	var first error
	for len(ids) > 0 {
		n := min(len(ids), ackChunk)
		err := c.ModifyAckDeadline(ctx, &pubsubpb.ModifyAckDeadlineRequest{
			Subscription: subscription, AckIds: ids[:n], AckDeadlineSeconds: int32(math.Ceil(d.Seconds())),
		})
		if err != nil && first == nil && !errors.Is(err, context.Canceled) {
			first = fmt.Errorf("pubsubio: modifyAckDeadline of %d ids on %s: %w", n, subscription, err)
		}
		ids = ids[n:]
	}
	return first
}

func warnModify(ctx context.Context, err error) {
	if err != nil {
		log.Warnf(ctx, "%v (the messages are redelivered after their lease)", err)
	}
}

package pubsubio

import (
	"context"

	pubsub "cloud.google.com/go/pubsub/v2/apiv1"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/beamdedup/beamdedup/internal/pubsubadmin"
)

func init() {
	register.DoFn2x1[context.Context, Message, error](&ackFn{})
}

// Ack acknowledges, on subscription, the message each Message of col was
// read from, at the end of each bundle: put it after the step that makes
// a message safe, fused with it, so that a failed bundle acks nothing.
// Messages without an AckID (ReadNative's) are passed over. A message
// Read still holds in this process is acked with its newest ack id. An
// ack Pub/Sub refuses after retries is logged and counted (acks_failed):
// the message is redelivered. It panics on invalid options; TryAck
// returns the error.
func Ack(s beam.Scope, subscription string, col beam.PCollection, opts ...Option) {
	if err := TryAck(s, subscription, col, opts...); err != nil {
		panic(err)
	}
}

// TryAck is Ack returning construction errors.
func TryAck(s beam.Scope, subscription string, col beam.PCollection, opts ...Option) error {
	c, err := newConfig("pubsubio.Ack", ackOptions, opts, pubsubadmin.CheckName(subscription, pubsubadmin.Subscriptions), needMessages(col))
	if err != nil {
		return err
	}
	beam.ParDo0(s.Scope("pubsubio.Ack"), &ackFn{Subscription: subscription, Endpoint: c.endpoint}, col)
	return nil
}

type ackFn struct {
	Subscription string
	Endpoint     string

	sub    *pubsub.SubscriptionAdminClient
	msgIDs []string
	ackIDs []string
}

func (fn *ackFn) Setup(ctx context.Context) error {
	var err error
	fn.sub, err = pubsubadmin.Subscriber(ctx, fn.Endpoint)
	return err
}

func (fn *ackFn) StartBundle(context.Context) {
	fn.msgIDs, fn.ackIDs = fn.msgIDs[:0], fn.ackIDs[:0]
}

func (fn *ackFn) ProcessElement(ctx context.Context, m Message) error {
	if m.AckID == "" {
		return nil
	}
	fn.msgIDs = append(fn.msgIDs, m.MessageID)
	fn.ackIDs = append(fn.ackIDs, m.AckID)
	if len(fn.ackIDs) >= ackChunk {
		fn.flush(ctx)
	}
	return nil
}

func (fn *ackFn) FinishBundle(ctx context.Context) error {
	fn.flush(ctx)
	return nil
}

func (fn *ackFn) flush(ctx context.Context) {
	if len(fn.ackIDs) == 0 {
		return
	}
	newest := releaseHeld(fn.Subscription, fn.msgIDs)
	ids := fn.ackIDs
	unheld := 0
	for i, id := range newest {
		if id == "" {
			unheld++
		} else {
			ids[i] = id
		}
	}
	acked, failed := 0, 0
	for len(ids) > 0 {
		n := min(len(ids), ackChunk)
		err := fn.sub.Acknowledge(ctx, &pubsubpb.AcknowledgeRequest{Subscription: fn.Subscription, AckIds: ids[:n]})
		switch status.Code(err) {
		case codes.OK:
			acked += n
		case codes.InvalidArgument, codes.FailedPrecondition:
			// An exactly-once subscription's lapsed lease: the message
			// comes back.
			acked += n
			log.Warnf(ctx, "pubsubio: ack of %d messages on %s refused (leases lapsed?), they will be redelivered: %v", n, fn.Subscription, err)
		default:
			failed += n
			log.Warnf(ctx, "pubsubio: ack of %d messages on %s on %s failed, they will be redelivered: %v", n, fn.Subscription, pubsubadmin.Target(fn.Endpoint), err)
		}
		ids = ids[n:]
	}
	cAcked.Inc(ctx, int64(acked))
	cAckFailed.Inc(ctx, int64(failed))
	cAckedUnheld.Inc(ctx, int64(unheld))
	fn.msgIDs, fn.ackIDs = fn.msgIDs[:0], fn.ackIDs[:0]
}

package pubsubio

import (
	"context"
	"fmt"

	pubsub "cloud.google.com/go/pubsub/v2/apiv1"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beamdedup/beamdedup/internal/pubsubadmin"
)

func init() {
	register.DoFn3x1[context.Context, Message, func(Message), error](&writeFn{})
	register.Emitter1[Message]()
}

// Write publishes each Message of col (Data, Attributes, OrderingKey) to
// topic, projects/P/topics/T, and returns them once Pub/Sub confirmed
// them, for Ack: at the end of each bundle, in the global window. A failed
// publish fails the bundle. It panics on invalid options; TryWrite returns
// the error.
func Write(s beam.Scope, topic string, col beam.PCollection, opts ...Option) beam.PCollection {
	published, err := TryWrite(s, topic, col, opts...)
	if err != nil {
		panic(err)
	}
	return published
}

// TryWrite is Write returning construction errors.
func TryWrite(s beam.Scope, topic string, col beam.PCollection, opts ...Option) (beam.PCollection, error) {
	c, err := newConfig("pubsubio.Write", writeOptions, opts, pubsubadmin.CheckName(topic, pubsubadmin.Topics), needMessages(col))
	if err != nil {
		return beam.PCollection{}, err
	}
	s = s.Scope("pubsubio.Write")
	return beam.ParDo(s, &writeFn{Topic: topic, Endpoint: c.endpoint, Batch: c.publishBatch}, col), nil
}

type writeFn struct {
	Topic    string
	Endpoint string
	Batch    int

	pub  *pubsub.TopicAdminClient
	buf  []*pubsubpb.PubsubMessage
	msgs []Message // of buf
	done []Message // published in this bundle
}

func (fn *writeFn) Setup(ctx context.Context) error {
	var err error
	fn.pub, err = pubsubadmin.Publisher(ctx, fn.Endpoint)
	return err
}

func (fn *writeFn) StartBundle(_ context.Context, _ func(Message)) {
	fn.buf, fn.msgs, fn.done = fn.buf[:0], fn.msgs[:0], fn.done[:0]
}

func (fn *writeFn) ProcessElement(ctx context.Context, m Message, _ func(Message)) error {
	fn.buf = append(fn.buf, toPublish(m))
	fn.msgs = append(fn.msgs, m)
	if len(fn.buf) >= fn.Batch {
		return fn.flush(ctx)
	}
	return nil
}

func (fn *writeFn) FinishBundle(ctx context.Context, emit func(Message)) error {
	if err := fn.flush(ctx); err != nil {
		return err
	}
	for _, m := range fn.done {
		emit(m)
	}
	fn.done = fn.done[:0]
	return nil
}

func (fn *writeFn) flush(ctx context.Context) error {
	if len(fn.buf) == 0 {
		return nil
	}
	if _, err := fn.pub.Publish(ctx, &pubsubpb.PublishRequest{Topic: fn.Topic, Messages: fn.buf}); err != nil {
		unacked := len(fn.buf) + len(fn.done)
		return fmt.Errorf("pubsubio: publish of %d messages to %s on %s failed: %w; the bundle fails with its %d messages unacked, so their input is redelivered (messages the bundle published before, if any, are published again)",
			len(fn.buf), fn.Topic, pubsubadmin.Target(fn.Endpoint), err, unacked)
	}
	cPublished.Inc(ctx, int64(len(fn.buf)))
	fn.done = append(fn.done, fn.msgs...)
	fn.buf, fn.msgs = fn.buf[:0], fn.msgs[:0]
	return nil
}

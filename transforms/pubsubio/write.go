package pubsubio

import (
	"context"
	"errors"
	"fmt"

	pubsub "cloud.google.com/go/pubsub/v2/apiv1"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
)

func init() {
	register.DoFn2x1[context.Context, Message, error](&writeFn{})
}

var messagesPublished = beam.NewCounter("pubsubio", "messages_published")

// DefaultPublishBatch is the default number of messages per Publish request.
const DefaultPublishBatch = 500

type writeConfig struct {
	Endpoint string
	Batch    int
}

// WriteOption configures Write.
type WriteOption func(*writeConfig) error

// WriteEndpoint publishes to an emulator (host:port) without TLS or
// credentials; see Endpoint.
func WriteEndpoint(hostPort string) WriteOption {
	return func(c *writeConfig) error {
		c.Endpoint = hostPort
		return nil
	}
}

// PublishBatch sets how many messages one Publish request carries (default
// 500; Pub/Sub allows up to 1000 and 10 MB).
func PublishBatch(n int) WriteOption {
	return func(c *writeConfig) error {
		if n <= 0 || n > 1000 {
			return fmt.Errorf("pubsubio: PublishBatch %d out of range [1, 1000]", n)
		}
		c.Batch = n
		return nil
	}
}

// Write publishes each Message of col (Data, Attributes, OrderingKey) to
// topic, a full name projects/P/topics/T. Messages are published before the
// bundle finishes, and a failed publish fails the bundle, so messages of the
// source fused into the same bundle are not acked unless their output was
// published. It panics on invalid options; TryWrite returns the error.
func Write(s beam.Scope, topic string, col beam.PCollection, opts ...WriteOption) {
	if err := TryWrite(s, topic, col, opts...); err != nil {
		panic(err)
	}
}

// TryWrite is Write returning construction errors.
func TryWrite(s beam.Scope, topic string, col beam.PCollection, opts ...WriteOption) error {
	c := writeConfig{Batch: DefaultPublishBatch}
	if err := checkName(topic, "topics"); err != nil {
		return err
	}
	var errs []error
	for _, o := range opts {
		if err := o(&c); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if got := col.Type().Type(); got != messageT {
		return fmt.Errorf("pubsubio: Write needs a PCollection<pubsubio.Message>, got %v", got)
	}
	s = s.Scope("pubsubio.Write")
	beam.ParDo0(s, &writeFn{Topic: topic, Endpoint: c.Endpoint, Batch: c.Batch}, col)
	return nil
}

type writeFn struct {
	Topic    string
	Endpoint string
	Batch    int

	pub *pubsub.TopicAdminClient
	buf []*pubsubpb.PubsubMessage
}

func (fn *writeFn) Setup(ctx context.Context) error {
	c, err := publisherClient(ctx, fn.Endpoint)
	if err != nil {
		return fmt.Errorf("pubsubio: dialing Pub/Sub: %w", err)
	}
	fn.pub = c
	return nil
}

func (fn *writeFn) StartBundle(_ context.Context) error {
	fn.buf = fn.buf[:0]
	return nil
}

func (fn *writeFn) ProcessElement(ctx context.Context, m Message) error {
	fn.buf = append(fn.buf, toPublish(m))
	if len(fn.buf) >= fn.Batch {
		return fn.flush(ctx)
	}
	return nil
}

func (fn *writeFn) FinishBundle(ctx context.Context) error {
	return fn.flush(ctx)
}

func (fn *writeFn) flush(ctx context.Context) error {
	if len(fn.buf) == 0 {
		return nil
	}
	if _, err := fn.pub.Publish(ctx, &pubsubpb.PublishRequest{Topic: fn.Topic, Messages: fn.buf}); err != nil {
		return fmt.Errorf("pubsubio: publish %d messages to %s: %w", len(fn.buf), fn.Topic, err)
	}
	messagesPublished.Inc(ctx, int64(len(fn.buf)))
	fn.buf = fn.buf[:0]
	return nil
}

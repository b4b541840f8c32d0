package pubsubio

import (
	"fmt"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	beampubsubio "github.com/apache/beam/sdks/v2/go/pkg/beam/io/pubsubio"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	pb "google.golang.org/genproto/googleapis/pubsub/v1"

	"github.com/beamdedup/beamdedup/internal/pubsubadmin"
)

func init() {
	register.DoFn1x1[*pb.PubsubMessage, Message](&fromNativeFn{})
	register.Function1x1(toNative)
}

var messageT = reflect.TypeOf(Message{})

func needMessages(col beam.PCollection) error {
	if got := col.Type().Type(); got != messageT {
		return fmt.Errorf("needs a PCollection<pubsubio.Message>, got %v", got)
	}
	return nil
}

// ReadNative reads subscription with Beam's io/pubsubio, which only
// Dataflow executes (acking after its durable commit); it takes
// IDAttribute and TimestampAttribute. The output is Read's
// PCollection<Message> without AckIDs.
func ReadNative(s beam.Scope, subscription string, opts ...Option) (beam.PCollection, error) {
	cfg, err := newConfig("pubsubio.ReadNative", nativeReadOptions, opts, pubsubadmin.CheckName(subscription, pubsubadmin.Subscriptions))
	if err != nil {
		return beam.PCollection{}, err
	}
	project, short, _ := pubsubadmin.SplitName(subscription, pubsubadmin.Subscriptions)
	s = s.Scope("pubsubio.ReadNative")
	raw := beampubsubio.Read(s, project, beampubsubio.ReadOptions{
		Subscription:       short,
		IDAttribute:        cfg.idAttribute,
		TimestampAttribute: cfg.timestampAttribute,
		WithAttributes:     true,
	})
	return beam.ParDo(s, &fromNativeFn{IDAttribute: cfg.idAttribute}, raw), nil
}

// WriteNative publishes a PCollection<Message> with Beam's io/pubsubio
// (Dataflow only).
func WriteNative(s beam.Scope, topic string, col beam.PCollection) error {
	project, short, ok := pubsubadmin.SplitName(topic, pubsubadmin.Topics)
	if !ok {
		return fmt.Errorf("pubsubio.WriteNative: %w", pubsubadmin.CheckName(topic, pubsubadmin.Topics))
	}
	if err := needMessages(col); err != nil {
		return fmt.Errorf("pubsubio.WriteNative: %w", err)
	}
	s = s.Scope("pubsubio.WriteNative")
	beampubsubio.Write(s, project, short, beam.ParDo(s, toNative, col))
	return nil
}

type fromNativeFn struct{ IDAttribute string }

func (f *fromNativeFn) ProcessElement(m *pb.PubsubMessage) Message {
	return newMessage(m.GetMessageId(), m.GetData(), m.GetAttributes(), m.GetOrderingKey(), m.GetPublishTime(), f.IDAttribute)
}

func toNative(m Message) *pb.PubsubMessage {
	return &pb.PubsubMessage{Data: m.Data, Attributes: m.Attributes, OrderingKey: m.OrderingKey}
}

package pubsubio

import (
	"reflect"
	"strconv"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func init() {
	beam.RegisterType(reflect.TypeOf((*Message)(nil)).Elem())
}

// Message is one Pub/Sub message as the sources emit it and the sink
// publishes it, a Beam schema type.
type Message struct {
	// ID identifies the message for deduplication: the value of the
	// configured id attribute when the message has it (a publisher-assigned
	// id survives publisher retries), else the server-assigned MessageID.
	ID string `beam:"id" json:"id"`
	// MessageID is the id Pub/Sub assigned: a redelivery keeps it, a
	// publisher retry gets a new one.
	MessageID   string            `beam:"message_id" json:"message_id"`
	Data        []byte            `beam:"data" json:"data"`
	Attributes  map[string]string `beam:"attributes" json:"attributes,omitempty"`
	PublishTime time.Time         `beam:"publish_time" json:"publish_time"`
	OrderingKey string            `beam:"ordering_key" json:"ordering_key,omitempty"`
	// AckID is the ack id of the delivery Read emitted, for Ack: keep it on
	// whatever a step makes of the message. Empty from ReadNative.
	AckID string `beam:"ack_id" json:"ack_id,omitempty"`
}

func fromReceived(rm *pubsubpb.ReceivedMessage, idAttr string) Message {
	pm := rm.GetMessage()
	m := newMessage(pm.GetMessageId(), pm.GetData(), pm.GetAttributes(), pm.GetOrderingKey(), pm.GetPublishTime(), idAttr)
	m.AckID = rm.GetAckId()
	return m
}

// newMessage is a delivered message, its ID the idAttr attribute when set.
func newMessage(id string, data []byte, attrs map[string]string, orderingKey string, pt *timestamppb.Timestamp, idAttr string) Message {
	m := Message{ID: id, MessageID: id, Data: nonNil(data), Attributes: nonNilMap(attrs), OrderingKey: orderingKey}
	if pt != nil {
		m.PublishTime = pt.AsTime()
	}
	if v := m.Attributes[idAttr]; idAttr != "" && v != "" {
		m.ID = v
	}
	return m
}

// nonNil and nonNilMap keep a Message's fields non-nil: the Go SDK writes
// a nil one as a null schema field, which Flink cannot decode.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

func nonNilMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// eventTime returns the element timestamp of m: the timestamp attribute
// when set and parseable (epoch milliseconds or RFC 3339, as Beam's
// Pub/Sub IO), else the publish time.
func eventTime(m Message, tsAttr string) time.Time {
	if v, ok := m.Attributes[tsAttr]; ok && tsAttr != "" {
		if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
			return time.UnixMilli(ms)
		}
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			return t
		}
	}
	return m.PublishTime
}

func toPublish(m Message) *pubsubpb.PubsubMessage {
	return &pubsubpb.PubsubMessage{Data: m.Data, Attributes: m.Attributes, OrderingKey: m.OrderingKey}
}

package pubsubio

import (
	"reflect"
	"strconv"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
)

func init() {
	beam.RegisterType(reflect.TypeOf((*Message)(nil)).Elem())
}

// Message is one Pub/Sub message as the sources emit it and the sink
// publishes it. It is a Beam schema type; its JSON names are its column
// names.
type Message struct {
	// ID identifies the message for deduplication: the value of the
	// configured id attribute when the message has it (a publisher-assigned
	// id survives publisher retries), else the server-assigned MessageID.
	ID string `beam:"id" json:"id"`
	// MessageID is the id Pub/Sub assigned at publish time. A publisher retry
	// gets a new one; a redelivery keeps it.
	MessageID   string            `beam:"message_id" json:"message_id"`
	Data        []byte            `beam:"data" json:"data"`
	Attributes  map[string]string `beam:"attributes" json:"attributes,omitempty"`
	PublishTime time.Time         `beam:"publish_time" json:"publish_time"`
	OrderingKey string            `beam:"ordering_key" json:"ordering_key,omitempty"`
	// AckID is the ack id of the delivery Read emitted; Ack acknowledges
	// the message with it. Keep it on whatever a step makes of the message
	// (a dead letter, the published row), so that the message can be acked
	// once that is safe. Empty from ReadNative, where Dataflow acks. Write
	// does not publish it.
	AckID string `beam:"ack_id" json:"ack_id,omitempty"`
}

// fromReceived converts a pulled message. idAttr may be empty.
func fromReceived(rm *pubsubpb.ReceivedMessage, idAttr string) Message {
	pm := rm.GetMessage()
	m := Message{
		ID:          pm.GetMessageId(),
		MessageID:   pm.GetMessageId(),
		Data:        nonNil(pm.GetData()),
		Attributes:  nonNilMap(pm.GetAttributes()),
		OrderingKey: pm.GetOrderingKey(),
		AckID:       rm.GetAckId(),
	}
	if pt := pm.GetPublishTime(); pt != nil {
		m.PublishTime = pt.AsTime()
	}
	if idAttr != "" {
		if v, ok := m.Attributes[idAttr]; ok && v != "" {
			m.ID = v
		}
	}
	return m
}

// nonNil and nonNilMap keep a Message's slice and map fields non-nil:
// the Go SDK writes a nil one as a null field of a schema row whose field
// is not nullable, which a Java runner (Flink) cannot decode where it
// decodes rows between steps (docs/flink.md).
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

// eventTime returns the element timestamp of m: the timestamp attribute when
// configured and parseable (RFC 3339 or integer epoch milliseconds, as Beam's
// Pub/Sub IO accepts), else the publish time. Bad attribute values never fail
// the pipeline.
func eventTime(m Message, tsAttr string) time.Time {
	if tsAttr != "" {
		if v, ok := m.Attributes[tsAttr]; ok {
			if t, ok := parseTimestamp(v); ok {
				return t
			}
		}
	}
	return m.PublishTime
}

func parseTimestamp(v string) (time.Time, bool) {
	if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
		return time.UnixMilli(ms), true
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, true
	}
	return time.Time{}, false
}

// toPublish converts m to the wire form for publishing; ID, MessageID,
// PublishTime and AckID belong to a delivery and are not sent.
func toPublish(m Message) *pubsubpb.PubsubMessage {
	return &pubsubpb.PubsubMessage{Data: m.Data, Attributes: m.Attributes, OrderingKey: m.OrderingKey}
}

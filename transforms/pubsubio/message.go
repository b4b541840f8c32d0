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
// publishes it. It is a Beam schema type.
type Message struct {
	// ID identifies the message for deduplication: the value of the
	// configured id attribute when the message has it (a publisher-assigned
	// id survives publisher retries), else the server-assigned MessageID.
	ID string `beam:"id"`
	// MessageID is the id Pub/Sub assigned at publish time. A publisher retry
	// gets a new one; a redelivery keeps it.
	MessageID   string            `beam:"message_id"`
	Data        []byte            `beam:"data"`
	Attributes  map[string]string `beam:"attributes"`
	PublishTime time.Time         `beam:"publish_time"`
	OrderingKey string            `beam:"ordering_key"`
}

// fromReceived converts a pulled message. idAttr may be empty.
func fromReceived(pm *pubsubpb.PubsubMessage, idAttr string) Message {
	m := Message{
		ID:          pm.GetMessageId(),
		MessageID:   pm.GetMessageId(),
		Data:        pm.GetData(),
		Attributes:  pm.GetAttributes(),
		OrderingKey: pm.GetOrderingKey(),
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

// toPublish converts m to the wire form for publishing; ID, MessageID and
// PublishTime are assigned by the server and not sent.
func toPublish(m Message) *pubsubpb.PubsubMessage {
	return &pubsubpb.PubsubMessage{Data: m.Data, Attributes: m.Attributes, OrderingKey: m.OrderingKey}
}

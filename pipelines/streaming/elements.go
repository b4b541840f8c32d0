package streaming

import (
	"fmt"
	"time"

	"github.com/beamdedup/beamdedup/transforms/kafkaio"
	"github.com/beamdedup/beamdedup/transforms/pubsubio"
)

// The attributes set on Pub/Sub dead letters, beside the message's own.
// A Kafka dead letter is kafkaio's (Record.DeadLetter): the headers
// dlq_reason, dlq_topic, dlq_partition and dlq_offset.
const (
	DLQReason        = "dlq_reason"       // why it is a dead letter (both sources)
	AttrMessageID    = "dlq_message_id"   // the message it is the dead letter of
	AttrSubscription = "dlq_subscription" // where it was read
)

// elements are what the pipeline's steps do with a source's elements: the
// one thing that differs between Kafka's records and Pub/Sub's messages
// inside the pipeline.
type elements[E any] interface {
	// payload is the bytes the row is decoded from.
	payload(e E) []byte
	// id is the element's own id, for a source keyed by it.
	id(e E) []byte
	// stamped is e with its timestamp set to t, and the column that holds
	// it (dedup.OnTime); ok false: the element holds no timestamp of its
	// own.
	stamped(e E, t time.Time) (E, bool)
	// deadLetter is the dead letter of e, read from input, with the
	// reason, and e's place (for the commit or ack after its write).
	deadLetter(e E, reason, input string) E
	// output is what is written for a kept element, keeping e's place:
	// e itself, or its row as JSON (rowJSON, called only then).
	output(e E, rowJSON func() []byte) E
	// raw is an element of b alone (a dead letter that is no element).
	raw(b []byte) E
}

// elementsOf returns the elements of E.
func elementsOf[E any]() elements[E] {
	var e E
	switch any(e).(type) {
	case kafkaio.Record:
		return any(records{}).(elements[E])
	case pubsubio.Message:
		return any(messages{}).(elements[E])
	}
	panic(fmt.Sprintf("streaming: no source has elements of type %T", e))
}

// records are Kafka's: the record itself is written out, with the row's
// event time as its timestamp; a dead letter carries where it was read in
// headers.
type records struct{}

// timeColumn is the Record's timestamp, as dedup names it.
const timeColumn = "timestamp"

func (records) payload(r kafkaio.Record) []byte { return r.Value }
func (records) id(r kafkaio.Record) []byte {
	return fmt.Appendf(nil, "%s/%d/%d", r.Topic, r.Partition, r.Offset)
}

func (records) stamped(r kafkaio.Record, t time.Time) (kafkaio.Record, bool) {
	r.Timestamp = t
	return r, true
}

func (records) deadLetter(r kafkaio.Record, reason, _ string) kafkaio.Record {
	return r.DeadLetter(reason)
}

func (records) output(r kafkaio.Record, _ func() []byte) kafkaio.Record { return r }
func (records) raw(b []byte) kafkaio.Record                             { return kafkaio.Record{Value: b} }

// messages are Pub/Sub's: the row is published as JSON; a dead letter
// carries the message's id and subscription in attributes.
type messages struct{}

func (messages) payload(m pubsubio.Message) []byte { return m.Data }
func (messages) id(m pubsubio.Message) []byte      { return []byte(m.ID) }

func (messages) stamped(m pubsubio.Message, _ time.Time) (pubsubio.Message, bool) { return m, false }

func (messages) deadLetter(m pubsubio.Message, reason, subscription string) pubsubio.Message {
	attrs := make(map[string]string, len(m.Attributes)+3)
	for k, v := range m.Attributes {
		attrs[k] = v
	}
	attrs[DLQReason] = reason
	attrs[AttrMessageID] = m.MessageID
	attrs[AttrSubscription] = subscription
	return pubsubio.Message{Data: m.Data, Attributes: attrs, OrderingKey: m.OrderingKey,
		MessageID: m.MessageID, AckID: m.AckID}
}

func (messages) output(m pubsubio.Message, rowJSON func() []byte) pubsubio.Message {
	return pubsubio.Message{Data: rowJSON(), Attributes: map[string]string{}, MessageID: m.MessageID, AckID: m.AckID}
}

func (messages) raw(b []byte) pubsubio.Message { return pubsubio.Message{Data: b} }

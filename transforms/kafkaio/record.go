package kafkaio

import (
	"reflect"
	"strconv"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/twmb/franz-go/pkg/kgo"
)

func init() {
	beam.RegisterType(reflect.TypeFor[Record]())
	beam.RegisterType(reflect.TypeFor[Header]())
}

// Record is one Kafka record as Read emits it and Write writes it. It is a
// Beam schema type; its beam tags are its column names.
//
// Topic, Partition, Offset and Skipped say where the record was read.
// Write does not write them: it writes Key, Value, Headers and Timestamp
// to its own topic, and hands the record back as it came once Kafka
// confirmed it, so that Commit, after Write, commits the offset it was
// read from. Keep them on whatever a step makes of a record (its output,
// its dead letter).
type Record struct {
	Topic     string `beam:"topic"`
	Partition int32  `beam:"partition"`
	Offset    int64  `beam:"offset"`
	// Skipped is how many offsets before Offset in its partition Read
	// passed over since the record before it (or since where it started):
	// transaction markers, an aborted transaction's records, records a
	// compaction removed. Commit counts them safe with the record. A
	// record Read did not emit leaves it 0.
	Skipped int64 `beam:"skipped"`
	// Key is the record's key; empty for a record without one (Write
	// writes an empty Key as no key).
	Key   []byte `beam:"key"`
	Value []byte `beam:"value"`
	// Headers are the record's headers, in order (a key may repeat).
	Headers []Header `beam:"headers"`
	// Timestamp is the record's timestamp (its create time, or the
	// broker's append time on a topic that sets it); Read stamps the
	// element with it. Write writes it; a zero Timestamp is the time of
	// the write.
	Timestamp time.Time `beam:"timestamp"`
}

// Header is a record header.
type Header struct {
	Key   string `beam:"key"`
	Value []byte `beam:"value"`
}

// Header returns the value of the last header named key, and whether
// there is one.
func (r Record) Header(key string) ([]byte, bool) {
	for i := len(r.Headers) - 1; i >= 0; i-- {
		if r.Headers[i].Key == key {
			return r.Headers[i].Value, true
		}
	}
	return nil, false
}

// The headers a dead letter carries (DeadLetter).
const (
	headerReason    = "dlq_reason"
	headerTopic     = "dlq_topic"
	headerPartition = "dlq_partition"
	headerOffset    = "dlq_offset"
)

// DeadLetter returns r as a dead letter: its key, value, timestamp and
// headers, with the headers dlq_reason (reason), dlq_topic, dlq_partition
// and dlq_offset (where it was read) added, and where it was read kept,
// so that writing it with Write and then Commit commits its offset. Write
// counts a record with a dlq_reason header as dead-lettered
// (records_dead_lettered), not written.
func (r Record) DeadLetter(reason string) Record {
	d := r
	d.Headers = append(append(make([]Header, 0, len(r.Headers)+4), r.Headers...),
		Header{Key: headerReason, Value: []byte(reason)},
		Header{Key: headerTopic, Value: []byte(r.Topic)},
		Header{Key: headerPartition, Value: []byte(strconv.Itoa(int(r.Partition)))},
		Header{Key: headerOffset, Value: []byte(strconv.FormatInt(r.Offset, 10))})
	return d
}

// fromKgo converts a fetched record. The slices are non-nil: the Go SDK
// writes a nil one as a null field of a schema row whose field is not
// nullable, which a Java runner (Flink) cannot decode where it decodes
// rows between steps.
func fromKgo(r *kgo.Record) Record {
	hs := make([]Header, len(r.Headers))
	for i, h := range r.Headers {
		hs[i] = Header{Key: h.Key, Value: nonNil(h.Value)}
	}
	return Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset,
		Key: nonNil(r.Key), Value: nonNil(r.Value), Headers: hs, Timestamp: r.Timestamp}
}

// toKgo is the record Write produces for r to topic.
func toKgo(r Record, topic string) *kgo.Record {
	kr := &kgo.Record{Topic: topic, Value: r.Value, Timestamp: r.Timestamp}
	if len(r.Key) > 0 {
		kr.Key = r.Key
	}
	if len(r.Headers) > 0 {
		kr.Headers = make([]kgo.RecordHeader, len(r.Headers))
		for i, h := range r.Headers {
			kr.Headers[i] = kgo.RecordHeader{Key: h.Key, Value: h.Value}
		}
	}
	return kr
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

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

// Record is one Kafka record as Read emits it and Write writes it, a Beam
// schema type. Topic, Partition, Offset and Skipped say where it was read
// (Write does not write them, and hands them on for Commit): keep them on
// whatever a step makes of a record.
type Record struct {
	Topic     string `beam:"topic"`
	Partition int32  `beam:"partition"`
	Offset    int64  `beam:"offset"`
	// Skipped is how many offsets before Offset Read passed over since the
	// record before it (transaction markers, aborted records, compacted
	// ones); Commit counts them safe with the record.
	Skipped int64 `beam:"skipped"`
	// Key is empty for a record without one (Write writes no key).
	Key   []byte `beam:"key"`
	Value []byte `beam:"value"`
	// Headers are the record's headers, in order (a key may repeat).
	Headers []Header `beam:"headers"`
	// Timestamp is the record's create (or log append) time, the element's
	// timestamp; Write writes a zero Timestamp as the time of the write.
	Timestamp time.Time `beam:"timestamp"`
}

// Header is a record header.
type Header struct {
	Key   string `beam:"key"`
	Value []byte `beam:"value"`
}

// Header returns the value of the last header named key, if any.
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

// DeadLetter returns r with the headers dlq_reason (reason), dlq_topic,
// dlq_partition and dlq_offset added, and where it was read kept for
// Commit. Write counts a record with a dlq_reason header as dead-lettered.
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
// writes a nil one as a null schema field, which Flink cannot decode.
func fromKgo(r *kgo.Record) Record {
	hs := make([]Header, len(r.Headers))
	for i, h := range r.Headers {
		hs[i] = Header{Key: h.Key, Value: nonNil(h.Value)}
	}
	return Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset,
		Key: nonNil(r.Key), Value: nonNil(r.Value), Headers: hs, Timestamp: r.Timestamp}
}

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

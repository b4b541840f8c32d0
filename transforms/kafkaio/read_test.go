package kafkaio

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/testing/kafkatest"
)

var base = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestReadEmitsEveryRecordOfEveryPartitionWithWhereItWasRead(t *testing.T) {
	b := kafkatest.Shared(t)
	topic := b.NewTopic(t, 2)
	written := produce(t, b, topic, 0, 200, base)

	c := newCollection(t.Name())
	p, s := beam.NewPipelineWithRoot()
	beam.ParDo(s, &collectFn{Name: t.Name()}, Read(s, b.Addr, topic, IdleStop(quiet), MaxBundleRecords(50)))
	pr, err := runPipeline(t, p, 2*time.Minute)
	require.NoError(t, err)

	got := map[string]Record{}
	for _, r := range c.records() {
		got[string(r.Key)] = r
	}
	require.Len(t, got, 200, "every record once")
	parts := map[int32]bool{}
	for _, w := range written {
		r := got[string(w.Key)]
		assert.Equal(t, topic, r.Topic)
		assert.Equal(t, w.Partition, r.Partition)
		assert.Equal(t, w.Offset, r.Offset)
		assert.Equal(t, w.Value, r.Value)
		assert.Equal(t, []Header{{Key: "i", Value: w.Headers[0].Value}}, r.Headers)
		assert.True(t, w.Timestamp.Equal(r.Timestamp), "timestamp %v, want %v", r.Timestamp, w.Timestamp)
		parts[r.Partition] = true
	}
	assert.Len(t, parts, 2, "both partitions read")
	assert.Equal(t, int64(200), readCounters(pr).Read)
}

// Where Read starts, by option: the group's committed offsets (and the
// earliest where it has none), the earliest, the latest, or a time.
func TestReadStartsWhereItIsTold(t *testing.T) {
	b := kafkatest.Shared(t)
	tests := []struct {
		name string
		opts func(group string) []Option
		// want: the records (by index) read, of 0..19 written before the
		// job; group committed: partition 0 at offset 3.
		want func(i int, partition int32, offset int64) bool
	}{
		{"committed, else earliest", func(g string) []Option { return []Option{Group(g)} },
			func(_ int, p int32, o int64) bool { return p != 0 || o >= 3 }},
		{"earliest", func(g string) []Option { return []Option{Group(g), FromEarliest()} },
			func(int, int32, int64) bool { return true }},
		{"latest", func(g string) []Option { return []Option{Group(g), FromLatest()} },
			func(int, int32, int64) bool { return false }},
		{"a time", func(string) []Option { return []Option{StartAt(base.Add(15 * time.Second))} },
			func(i int, _ int32, _ int64) bool { return i >= 15 }},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			topic := b.NewTopic(t, 2)
			group := fmt.Sprintf("start-%d", i)
			written := produce(t, b, topic, 0, 20, base)
			adm, err := b.Admin()
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, err = adm.CommitOffsets(ctx, group, offsetsOf(topic, map[int32]int64{0: 3}))
			require.NoError(t, err)

			name := t.Name()
			c := newCollection(name)
			p, s := beam.NewPipelineWithRoot()
			beam.ParDo(s, &collectFn{Name: name}, Read(s, b.Addr, topic, append(tt.opts(group), IdleStop(quiet))...))
			_, err = runPipeline(t, p, 2*time.Minute)
			require.NoError(t, err)

			got := map[string]bool{}
			for _, r := range c.records() {
				got[string(r.Key)] = true
			}
			for i, w := range written {
				assert.Equal(t, tt.want(i, w.Partition, w.Offset), got[string(w.Key)], "record %d (partition %d, offset %d)", i, w.Partition, w.Offset)
			}
		})
	}
}

func TestTryReadRejectsBadConfigurationNamingEveryMistake(t *testing.T) {
	tests := []struct {
		name    string
		brokers string
		topic   string
		opts    []Option
		want    []string
	}{
		{"no brokers", "", "t", nil, []string{"kafkaio.Read: no brokers; want host:port"}},
		{"a broker without a port", "localhost", "t", nil, []string{`broker "localhost" is not host:port`}},
		{"a bad topic", "h:1", "a topic", nil, []string{`topic "a topic" is not a valid Kafka topic name`}},
		{"two starts", "h:1", "t", []Option{FromLatest(), StartAt(base)}, []string{"FromLatest and StartAt are both given"}},
		{"earliest and latest", "h:1", "t", []Option{FromEarliest(), FromLatest()}, []string{"FromEarliest and FromLatest are both given"}},
		{"a Write option", "h:1", "t", []Option{WriteTimeout(time.Second)}, []string{"WriteTimeout does not apply to kafkaio.Read"}},
		{"several at once", "", "", []Option{IdleStop(-time.Second), nil, Group(""), MaxInFlight(-1)},
			[]string{"no brokers", "no topic", "IdleStop(-1s)", "option 2 of 4 is nil", `Group("")`, "MaxInFlight(-1)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, s := beam.NewPipelineWithRoot()
			_, err := TryRead(s, tt.brokers, tt.topic, tt.opts...)
			require.Error(t, err)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.NotContains(t, err.Error(), "\n", "one line")
		})
	}
}

func TestReadOfATopicThatDoesNotExistFailsNamingIt(t *testing.T) {
	b := kafkatest.Shared(t)
	p, s := beam.NewPipelineWithRoot()
	beam.ParDo(s, &collectFn{Name: t.Name()}, Read(s, b.Addr, "no-such-topic", IdleStop(quiet)))
	newCollection(t.Name())
	_, err := runPipeline(t, p, 2*time.Minute)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "kafkaio: topic no-such-topic on "+b.Addr+" does not exist")
}

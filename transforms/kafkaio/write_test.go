package kafkaio

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/beamdedup/beamdedup/testing/kafkatest"
)

// consumeAll reads every record of topic, from the start to its end
// offsets.
func consumeAll(t *testing.T, b *kafkatest.Broker, topic string) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	end, err := b.EndOffsets(ctx, topic)
	require.NoError(t, err)
	total := int64(0)
	for _, o := range end {
		total += o
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()
	var out []*kgo.Record
	for int64(len(out)) < total {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "read %d of %d records of %s", len(out), total, topic)
		out = append(out, fs.Records()...)
	}
	return out
}

func TestWriteWritesEveryRecordByKeyAndEmitsWhatKafkaConfirmed(t *testing.T) {
	b := kafkatest.Shared(t)
	topic := b.NewTopic(t, 2)
	var in []Record
	for i := range 300 {
		in = append(in, Record{Topic: "source", Partition: 1, Offset: int64(i), Key: []byte(fmt.Sprintf("k%d", i%30)),
			Value: []byte(fmt.Sprint(i)), Headers: []Header{{Key: "h", Value: []byte("x")}}, Timestamp: base.Add(time.Duration(i) * time.Millisecond)})
	}
	name := t.Name()
	c := newCollection(name)
	p, s := beam.NewPipelineWithRoot()
	beam.ParDo(s, &collectFn{Name: name}, Write(s, b.Addr, topic, beam.CreateList(s, in)))
	pr, err := runPipeline(t, p, 2*time.Minute)
	require.NoError(t, err)

	got := consumeAll(t, b, topic)
	require.Len(t, got, 300)
	partitionOf := map[string]int32{}
	parts := map[int32]bool{}
	for _, r := range got {
		if p, ok := partitionOf[string(r.Key)]; ok {
			assert.Equal(t, p, r.Partition, "a key's records on one partition")
		}
		partitionOf[string(r.Key)] = r.Partition
		parts[r.Partition] = true
		assert.Equal(t, "h", r.Headers[0].Key)
		var i int
		fmt.Sscan(string(r.Value), &i)
		assert.True(t, base.Add(time.Duration(i)*time.Millisecond).Equal(r.Timestamp), "the record's timestamp is written")
	}
	assert.Len(t, parts, 2, "the keys spread over both partitions")
	offsets := map[int64]bool{}
	for _, r := range c.records() {
		assert.Equal(t, "source", r.Topic, "handed back as it came")
		offsets[r.Offset] = true
	}
	assert.Len(t, offsets, 300, "every record handed back once confirmed")
	assert.Equal(t, int64(300), readCounters(pr).Written)
}

func TestWriteToAMissingTopicFailsTheBundleNamingWhatWasNotWritten(t *testing.T) {
	b := kafkatest.Shared(t)
	in := []Record{{Topic: "orders", Partition: 0, Offset: 5, Value: []byte("a")}, {Topic: "orders", Partition: 0, Offset: 9, Value: []byte("b")}}
	p, s := beam.NewPipelineWithRoot()
	Write(s, b.Addr, "no-such-output", beam.CreateList(s, in), WriteTimeout(5*time.Second))
	_, err := runPipeline(t, p, 2*time.Minute)
	require.Error(t, err)
	for _, w := range []string{"kafkaio: write of 2 of 2 records to topic no-such-output on " + b.Addr + " failed",
		"not written: 2 read from orders partition 0 offsets 5-9", "their offsets are not committed"} {
		assert.Contains(t, err.Error(), w)
	}
}

func TestTryWriteRejectsBadArgumentsNamingEach(t *testing.T) {
	_, s := beam.NewPipelineWithRoot()
	_, err := TryWrite(s, "h", "", beam.Create(s, "x"), Group("g"), WriteTimeout(0))
	require.Error(t, err)
	for _, w := range []string{"kafkaio.Write:", `broker "h" is not host:port`, "no topic", "needs a PCollection<kafkaio.Record>, got string",
		"Group does not apply to kafkaio.Write", "WriteTimeout(0s)"} {
		assert.Contains(t, err.Error(), w)
	}
}

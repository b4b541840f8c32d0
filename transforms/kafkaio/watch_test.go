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

// With WatchPartitions, a partition added while the job runs is read by
// that job, from its first record, and committed as the others.
func TestWatchPartitionsReadsAPartitionAddedWhileTheJobRuns(t *testing.T) {
	b := kafkatest.Shared(t)
	topic := b.NewTopic(t, 2)
	produce(t, b, topic, 0, 20, base)
	const group = "watch"
	name := t.Name()
	c := newCollection(name)
	st, controlled := newControl(t)
	p, s := beam.NewPipelineWithRoot()
	recs := Read(s, b.Addr, topic, Group(group), WatchPartitions(200*time.Millisecond), controlled)
	Commit(s, b.Addr, group, beam.ParDo(s, &collectFn{Name: name}, recs))

	seen := func(partition int32) int {
		n := 0
		for _, r := range c.records() {
			if r.Partition == partition {
				n++
			}
		}
		return n
	}
	added := make(chan error, 1)
	go func() {
		defer st.Stop()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for len(c.records()) < 20 && ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
		}
		if err := b.AddPartitions(ctx, topic, 1); err != nil {
			added <- err
			return
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			added <- err
			return
		}
		defer cl.Close()
		var recs []*kgo.Record
		for i := range 10 {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: 2, Key: []byte(fmt.Sprintf("new%d", i)), Value: []byte("v"), Timestamp: base})
		}
		added <- cl.ProduceSync(ctx, recs...).FirstErr()
		for seen(2) < 10 && ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
		}
	}()
	_, err := runPipeline(t, p, 2*time.Minute)
	require.NoError(t, err)
	require.NoError(t, <-added)
	assert.Equal(t, 10, seen(2), "the added partition's records, each once")
	assert.Len(t, c.records(), 30)
	waitCommitted(t, b, group, topic, map[int32]int64{0: int64(seen(0)), 1: int64(seen(1)), 2: 10})
}

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

// A topic written with transactions: a reader reads only committed
// records (an aborted transaction's never), passes over the markers, and
// with IdleStop ends although the partition's last entry is a marker,
// committed to the partition's end.
func TestReadReadsOnlyCommittedTransactionsAndEndsAfterTheirMarkers(t *testing.T) {
	b := kafkatest.Shared(t)
	topic := b.NewTopic(t, 2)
	ctx, cl := transactionalProducer(t, b, topic)
	txn := func(from, n int, commit kgo.TransactionEndTry) {
		require.NoError(t, cl.BeginTransaction())
		for i := from; i < from+n; i++ {
			require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte("v")}).FirstErr())
		}
		require.NoError(t, cl.EndTransaction(ctx, commit))
	}
	txn(0, 20, kgo.TryCommit)
	txn(20, 10, kgo.TryAbort)
	txn(30, 20, kgo.TryCommit) // the last entry of each partition: a commit marker

	const group = "transactional-input"
	c := newCollection(t.Name())
	p, s := beam.NewPipelineWithRoot()
	recs := Read(s, b.Addr, topic, Group(group), IdleStop(quiet))
	Commit(s, b.Addr, group, beam.ParDo(s, &collectFn{Name: t.Name()}, recs))
	_, err := runPipeline(t, p, 2*time.Minute)
	require.NoError(t, err, "the job ends by itself: the readers reach the ends past the markers")
	end, err := b.EndOffsets(ctx, topic) // the markers are written after EndTransaction returns
	require.NoError(t, err)
	got := map[string]bool{}
	for _, r := range c.records() {
		got[string(r.Key)] = true
	}
	for i := range 50 {
		assert.Equal(t, i < 20 || i >= 30, got[fmt.Sprintf("k%d", i)], "record %d (20-29 aborted)", i)
	}
	assert.Len(t, c.records(), 40)
	assert.Equal(t, end, committedNow(t, b, group, topic), "committed to each partition's end, past its last marker")
}

// A reader that starts at a transaction's marker (the group committed
// there, or a runner restored the reader's position there) counts the
// offsets it passes over with its first record: the partition is
// committed to its end.
func TestAReaderStartingAtAMarkerCountsItWithItsFirstRecord(t *testing.T) {
	b := kafkatest.Shared(t)
	topic := b.NewTopic(t, 1)
	ctx, cl := transactionalProducer(t, b, topic)
	require.NoError(t, cl.BeginTransaction())
	rs := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("a")}, &kgo.Record{Value: []byte("b")})
	require.NoError(t, rs.FirstErr())
	require.NoError(t, cl.EndTransaction(ctx, kgo.TryCommit))
	marker := rs[1].Record.Offset + 1
	require.NoError(t, cl.BeginTransaction())
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte("c")}).FirstErr())
	require.NoError(t, cl.EndTransaction(ctx, kgo.TryCommit))

	const group = "start-at-marker"
	adm, err := b.Admin()
	require.NoError(t, err)
	_, err = adm.CommitOffsets(ctx, group, offsetsOf(topic, map[int32]int64{0: marker}))
	require.NoError(t, err)
	c := newCollection(t.Name())
	p, s := beam.NewPipelineWithRoot()
	Commit(s, b.Addr, group, beam.ParDo(s, &collectFn{Name: t.Name()}, Read(s, b.Addr, topic, Group(group), IdleStop(quiet))))
	_, err = runPipeline(t, p, 2*time.Minute)
	require.NoError(t, err)
	require.Len(t, c.records(), 1)
	assert.Equal(t, "c", string(c.records()[0].Value))
	assert.Equal(t, int64(1), c.records()[0].Skipped, "the marker before it")
	end, err := b.EndOffsets(ctx, topic)
	require.NoError(t, err)
	assert.Equal(t, end, committedNow(t, b, group, topic))
}

// transactionalProducer is a client producing into topic with
// transactions, closed at the test's end, and a context of a minute for
// its calls.
func transactionalProducer(t *testing.T, b *kafkatest.Broker, topic string) (context.Context, *kgo.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.TransactionalID(t.Name()), kgo.DefaultProduceTopic(topic))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return ctx, cl
}

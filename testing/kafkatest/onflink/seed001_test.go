package onflink_test

import (
	"context"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/beamdedup/beamdedup/internal/flinkopts"
	"github.com/beamdedup/beamdedup/internal/flinkrest"
	"github.com/beamdedup/beamdedup/internal/jobrun"
	"github.com/beamdedup/beamdedup/pipelines/orders"
	"github.com/beamdedup/beamdedup/pipelines/streaming"
	"github.com/beamdedup/beamdedup/testing/flinktest"
	"github.com/beamdedup/beamdedup/testing/kafkatest"
	"github.com/beamdedup/beamdedup/transforms/kafkaio"
)

// Seed 001's whole pipeline (pipelines/streaming over streaming.Kafka:
// read, decode with dead letters, KeepFirst by order_id, write with Kafka
// transactions, commit) as a production user runs it on the session
// cluster: streaming mode, a checkpoint every 2 s, parallelism 2 with the
// SDK workers processes of both TaskManagers. The output is read as a
// read_committed consumer reads it.
//
//  1. 20,000 orders (every one priced under 100 twice) and 3 undecodable
//     records: each order once on the output topic, the undecodable ones on
//     the dead-letter topic with their reason, then a stop with a savepoint
//     leaves the group committed at the end of each partition.
//  2. The job restored from that savepoint reads 10,000 new orders (with
//     their duplicates) and 500 resends of old order_ids, streamed in as it
//     runs; while it reads them, once a checkpoint triggered after new orders
//     were out has completed and more are out, kill -9 of the TaskManager
//     running the busiest source subtask (with its process group). Flink
//     restores the job from that checkpoint: no resend is emitted again
//     (KeepFirst's state came through the savepoint and the checkpoint), no
//     new order is lost, and none is written twice: the transactions the
//     killed job wrote after the checkpoint are aborted, those before it
//     committed. The group is committed at the end of each partition at the
//     end.
func TestOnFlink_Seed001RemembersEveryOrderAcrossASavepointAndWritesEachExactlyOnceWithTransactionsWhenATaskManagerIsKilled(t *testing.T) {
	const (
		oldCount    = 20000
		newCount    = 10000
		resendCount = 500
	)
	c := flinktest.SharedCluster(t)
	_, err := c.Replenish(2)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, err := c.Replenish(2)
		assert.NoError(t, err, "the cluster's TaskManagers replenished")
	})
	b := kafkatest.Shared(t)
	src := streaming.Kafka{Brokers: b.Addr, InputTopic: b.NewTopic(t, 2), OutputTopic: b.NewTopic(t, 2),
		DeadLetterTopic: b.NewTopic(t, 1), Group: "seed001", Write: []kafkaio.Option{kafkaio.Transactional("seed001")}}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	stampOnAppend(t, ctx, b, src.OutputTopic)
	out := b.Count(t, src.OutputTopic)
	dead := b.Count(t, src.DeadLetterTopic)
	rest := flinkrest.New(c.REST)

	undecodable := []string{"not json", `{"order_id": ""}`, `{"price": 3}`}
	old := orders.Generate(oldCount, 1)
	oldIDs := orderIDs(old)
	require.Len(t, oldIDs, oldCount)
	require.NoError(t, streaming.ProduceOrders(ctx, b.Addr, src.InputTopic, old, undecodable...))

	// 1. Every order once, the undecodable dead-lettered, a savepoint.
	j, id := startSeed001(t, c, src, "")
	flinktest.Await(t, 3*time.Minute, "every one of the 20,000 orders on the output topic and the 3 dead letters", func() bool {
		return present(out.PerKey(), oldIDs) == oldCount && dead.Total() >= len(undecodable)
	})
	savepoint, err := j.StopWithSavepoint(ctx, "", 4*time.Minute)
	require.NoError(t, err)
	_, err = j.Wait()
	require.NoError(t, err, "a job stopped with a savepoint ends without an error")
	perKey := readPerKey(t, ctx, b, src.OutputTopic)
	assert.Equal(t, oldCount, once(perKey, oldIDs), "each of the 20,000 orders exactly once on the output topic")
	assert.Len(t, perKey, oldCount, "nothing else on the output topic")
	dl, err := b.ReadAll(ctx, src.DeadLetterTopic)
	require.NoError(t, err)
	var deadValues []string
	for _, r := range dl {
		deadValues = append(deadValues, string(r.Value))
		assert.NotEmpty(t, header(r, streaming.DLQReason), "the dead letter %q carries its reason", r.Value)
	}
	assert.ElementsMatch(t, undecodable, deadValues, "the undecodable records on the dead-letter topic, with their bytes")
	assertCommittedToTheEnd(t, ctx, b, src, "when the job stopped with a savepoint")
	cs, err := rest.Checkpoints(ctx, id)
	require.NoError(t, err)
	t.Logf("20,000 orders once and 3 dead letters, %d checkpoints completed, then the savepoint %s (load %s)", cs.Counts.Completed, savepoint, loadAvg())

	// 2. New orders and resends of old ones, streamed into the restored job;
	// a TaskManager killed while it reads them.
	fresh := orders.Generate(newCount, 2)
	for i := range fresh {
		fresh[i].CreatedAt = fresh[i].CreatedAt.Add(oldCount * time.Second) // the seed's clock goes on
	}
	newIDs := orderIDs(fresh)
	require.Len(t, newIDs, newCount)
	require.Zero(t, present(perKey, newIDs), "the new order_ids are not old ones")
	stream, resent := withResends(fresh, old, oldIDs, resendCount)
	require.Len(t, resent, resendCount)
	newOut := func() int { return present(out.PerKey(), newIDs) }

	// A first part is there when the job restores, the middle streams in as
	// it runs (500 records a second), and the end once it runs again after
	// the kill: the kill finds it reading, however fast the machine.
	first, last := 2000, len(stream)-2000
	require.NoError(t, streaming.ProduceOrders(ctx, b.Addr, src.InputTopic, stream[:first]))
	j, id = startSeed001(t, c, src, savepoint)
	cs, err = rest.Checkpoints(ctx, id)
	require.NoError(t, err)
	require.NotNil(t, cs.Latest.Restored, "the job restored")
	assert.True(t, cs.Latest.Restored.IsSavepoint, "restored from the savepoint")
	// The second half of the middle waits for the checkpoint below: under
	// load the first half can be read and out before that checkpoint
	// completes, and nothing new would come out after it until the kill.
	produced, producing, release := produceAtARate(t, ctx, b, src.InputTopic, stream[first:last], 250, 500*time.Millisecond, (last-first)/2)

	// The kill comes once a checkpoint holds new orders (triggered after
	// some were out) and more are out after it: KeepFirst must remember the
	// former after the restore, and emits the latter again.
	flinktest.Await(t, time.Minute, "new orders out of the restored job", func() bool { return newOut() >= 500 })
	someOut := time.Now().UnixMilli()
	flinktest.Await(t, 2*time.Minute, "a checkpoint triggered after new orders were out, completed", func() bool {
		cs, err = rest.Checkpoints(ctx, id)
		return err == nil && cs.Latest.Completed != nil && cs.Latest.Completed.Triggered > someOut
	})
	atCheckpoint := newOut()
	release()
	flinktest.Await(t, 2*time.Minute, "new orders out after that checkpoint", func() bool { return newOut() >= atCheckpoint+100 })
	tm := sourceTaskManager(t, ctx, c, rest, id)
	cs, err = rest.Checkpoints(ctx, id)
	require.NoError(t, err)
	lastCompleted, restoredBefore := cs.Latest.Completed.ID, cs.Counts.Restored
	atKill, streamedAtKill := newOut(), first+int(produced.Load())
	killed := time.Now()
	tm.Kill() // with its process group
	var restored flinkrest.Checkpoint
	flinktest.Await(t, 2*time.Minute, "the job restored from a checkpoint, every task running", func() bool {
		cs, err := rest.Checkpoints(ctx, id)
		if err != nil || cs.Counts.Restored <= restoredBefore || cs.Latest.Restored == nil || !running(ctx, rest, id) {
			return false
		}
		restored = *cs.Latest.Restored
		if cp, ok := cs.Find(restored.ID); ok {
			restored.Triggered = cp.Triggered
		}
		return true
	})
	runningAgain := time.Now()
	require.NoError(t, streaming.ProduceOrders(ctx, b.Addr, src.InputTopic, stream[last:]))
	assert.False(t, restored.IsSavepoint, "restored from a checkpoint")
	assert.GreaterOrEqual(t, restored.ID, lastCompleted, "restored from the last checkpoint completed before the kill, or a later one")
	require.NotZero(t, restored.Triggered, "checkpoint %d in the checkpoint history", restored.ID)
	triggered := time.UnixMilli(restored.Triggered)
	flinktest.Await(t, 3*time.Minute, "new orders out of the job restored after the kill", func() bool { return newOut() > atKill })
	outAgain := time.Since(killed)
	flinktest.Await(t, 3*time.Minute, "every new order on the output topic", func() bool { return newOut() == newCount })
	select {
	case err := <-producing:
		require.NoError(t, err, "the orders streamed in")
	case <-ctx.Done():
		t.Fatal("the orders still streaming in at the test's deadline")
	}
	end, err := b.EndOffsets(ctx, src.InputTopic)
	require.NoError(t, err)
	flinktest.Await(t, time.Minute, "the group committed at the end of each partition", func() bool {
		committed, err := b.Committed(ctx, src.Group, src.InputTopic)
		return err == nil && maps.Equal(committed, end)
	})
	_, err = j.StopWithSavepoint(ctx, "", 2*time.Minute)
	require.NoError(t, err)
	_, err = j.Wait()
	require.NoError(t, err, "the restored job stopped with a savepoint ends without an error")
	assertCommittedToTheEnd(t, ctx, b, src, "at the end")

	perKey = readPerKey(t, ctx, b, src.OutputTopic)
	assert.Equal(t, resendCount, once(perKey, resent), "none of the resends of old orders emitted again")
	assert.Equal(t, oldCount, once(perKey, oldIDs), "each old order exactly once in the whole output")
	assert.Equal(t, newCount, present(perKey, newIDs), "every new order on the output topic: none lost")
	assert.Equal(t, newCount, once(perKey, newIDs), "each new order exactly once: none written twice")
	assert.Len(t, perKey, oldCount+newCount, "nothing else on the output topic")
	t.Logf("%d of %d records streamed in when %s was killed, %d new orders out; restored from checkpoint %d (triggered %v before the kill; the last completed before it: %d), every task running %v after the kill, new orders out %v after it; %d resends emitted again; %d new orders lost; %d written twice (load %s)",
		streamedAtKill, len(stream), tm.Name, atKill, restored.ID, killed.Sub(triggered).Round(10*time.Millisecond), lastCompleted,
		runningAgain.Sub(killed).Round(100*time.Millisecond), outAgain.Round(100*time.Millisecond),
		resendCount-once(perKey, resent), newCount-present(perKey, newIDs), present(perKey, newIDs)-once(perKey, newIDs), loadAvg())
}

// startSeed001 starts seed 001's pipeline over src on the cluster,
// restored from savepoint unless empty, and returns the job and its id
// once every task of it runs.
func startSeed001(t *testing.T, c *flinktest.Cluster, src streaming.Kafka, savepoint string) (*jobrun.Job, string) {
	t.Helper()
	p, s := beam.NewPipelineWithRoot()
	_, err := streaming.Build(s, src, streaming.Config{})
	require.NoError(t, err)
	j := flinktest.Start(t, p, jobOptions(t, c, 2, flinkopts.Options{Streaming: true, CheckpointingInterval: 2 * time.Second,
		MaxParallelism: 8, SavepointPath: savepoint}))
	id := flinkJobID(t, j)
	rest := flinkrest.New(c.REST)
	flinktest.Await(t, 2*time.Minute, "every task of the job running", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return running(ctx, rest, id)
	})
	return j, id
}

// stampOnAppend makes the broker stamp each record of topic with its
// append time (LogAppendTime), whatever timestamp its producer gave it.
func stampOnAppend(t *testing.T, ctx context.Context, b *kafkatest.Broker, topic string) {
	t.Helper()
	adm, err := b.Admin()
	require.NoError(t, err)
	v := "LogAppendTime"
	resp, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "message.timestamp.type", Value: &v}}, topic)
	if err == nil {
		var r kadm.AlterConfigsResponse
		if r, err = resp.On(topic, nil); err == nil {
			err = r.Err
		}
	}
	require.NoError(t, err)
}

// orderIDs are the distinct order_ids of rows, in their first order.
func orderIDs(rows []orders.Order) []string {
	seen := map[string]bool{}
	var ids []string
	for _, o := range rows {
		if !seen[o.OrderID] {
			seen[o.OrderID] = true
			ids = append(ids, o.OrderID)
		}
	}
	return ids
}

// withResends is rows with n of old's orders (each the first order of an
// order_id among ids, spread over them) sent again, spread over rows, and
// the order_ids sent again.
func withResends(rows, old []orders.Order, ids []string, n int) (stream []orders.Order, resent []string) {
	byID := map[string]orders.Order{}
	for _, o := range old {
		if _, ok := byID[o.OrderID]; !ok {
			byID[o.OrderID] = o
		}
	}
	every := len(rows) / n
	for i, o := range rows {
		stream = append(stream, o)
		if r := i / every; i%every == every-1 && r < n {
			id := ids[r*len(ids)/n]
			stream = append(stream, byID[id])
			resent = append(resent, id)
		}
	}
	return stream, resent
}

// produceAtARate writes rows to topic as seed 001 does, chunk records each
// tick, in a goroutine: what it wrote so far, its end, and a release. The
// rows from index hold on wait for the release, so that a test can wait on
// an event (a checkpoint) without the stream running dry before it.
func produceAtARate(t *testing.T, ctx context.Context, b *kafkatest.Broker, topic string, rows []orders.Order, chunk int, tick time.Duration, hold int) (*atomic.Int64, <-chan error, func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	var produced atomic.Int64
	stopped, released := make(chan struct{}), make(chan struct{})
	release := sync.OnceFunc(func() { close(released) })
	t.Cleanup(func() {
		cancel()
		<-stopped
	})
	go func() {
		defer close(stopped)
		tk := time.NewTicker(tick)
		defer tk.Stop()
		for len(rows) > 0 {
			if int(produced.Load()) >= hold {
				select {
				case <-released:
				case <-ctx.Done():
					done <- ctx.Err()
					return
				}
			}
			n := min(chunk, len(rows))
			if p := int(produced.Load()); p < hold {
				n = min(n, hold-p)
			}
			if err := streaming.ProduceOrders(ctx, b.Addr, topic, rows[:n]); err != nil {
				done <- err
				return
			}
			rows = rows[n:]
			produced.Add(int64(n))
			select {
			case <-tk.C:
			case <-ctx.Done():
				done <- ctx.Err()
				return
			}
		}
		done <- nil
	}()
	return &produced, done, release
}

// present counts the ids with at least one record in perKey; once, those
// with exactly one.
func present(perKey map[string]int, ids []string) int {
	n := 0
	for _, id := range ids {
		if perKey[id] > 0 {
			n++
		}
	}
	return n
}

func once(perKey map[string]int, ids []string) int {
	n := 0
	for _, id := range ids {
		if perKey[id] == 1 {
			n++
		}
	}
	return n
}

// readPerKey reads topic to its end offsets and counts its records per
// key.
func readPerKey(t *testing.T, ctx context.Context, b *kafkatest.Broker, topic string) map[string]int {
	t.Helper()
	recs, err := b.ReadAll(ctx, topic)
	require.NoError(t, err)
	perKey := map[string]int{}
	for _, r := range recs {
		perKey[string(r.Key)]++
	}
	return perKey
}

// header is the value of r's header key ("" when it has none).
func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

func assertCommittedToTheEnd(t *testing.T, ctx context.Context, b *kafkatest.Broker, src streaming.Kafka, when string) {
	t.Helper()
	end, err := b.EndOffsets(ctx, src.InputTopic)
	require.NoError(t, err)
	committed, err := b.Committed(ctx, src.Group, src.InputTopic)
	require.NoError(t, err)
	assert.Equal(t, end, committed, "the group committed at the end of each partition %s", when)
}

// running reports whether the job is RUNNING with every task running.
func running(ctx context.Context, rest *flinkrest.Client, id string) bool {
	fj, err := rest.Job(ctx, id)
	return err == nil && fj.Running()
}

// sourceTaskManager is the live TaskManager running the subtask of the
// Kafka reader that wrote the most records.
func sourceTaskManager(t *testing.T, ctx context.Context, c *flinktest.Cluster, rest *flinkrest.Client, id string) *flinktest.Process {
	t.Helper()
	fj, err := rest.Job(ctx, id)
	require.NoError(t, err)
	var busy flinkrest.Subtask
	var names []string
	for _, v := range fj.Vertices {
		names = append(names, v.Name)
		if !strings.Contains(v.Name, "kafkaio.Read") {
			continue
		}
		sts, err := rest.Subtasks(ctx, id, v.ID)
		require.NoError(t, err)
		for _, st := range sts {
			if st.Status == "RUNNING" && st.Metrics.WriteRecords >= busy.Metrics.WriteRecords {
				busy = st
			}
		}
	}
	i := slices.IndexFunc(c.TaskManagers(), func(tm *flinktest.Process) bool { return tm.Name == busy.TaskManager })
	require.GreaterOrEqual(t, i, 0, "a live TaskManager runs the Kafka reader (%q) among the job's tasks %q", busy.TaskManager, names)
	return c.TaskManagers()[i]
}

// loadAvg is the machine's load average over the last minute.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0]
}

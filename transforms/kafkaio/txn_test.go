package kafkaio

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/beamdedup/beamdedup/testing/kafkatest"
)

// committedKeys reads, as a read_committed consumer, what topic holds by
// its last stable offsets, per key.
func committedKeys(t *testing.T, b *kafkatest.Broker, topic string, wait time.Duration) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(200*time.Millisecond))
	require.NoError(t, err)
	defer cl.Close()
	got := map[string]int{}
	for ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got[string(r.Key)]++ })
	}
	return got
}

func keyedRecords(n int) []Record {
	var in []Record
	for i := range n {
		in = append(in, Record{Topic: "source", Partition: 0, Offset: int64(i), Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprint(i))})
	}
	return in
}

func TestTransactionalWriteOnPrismCommitsEachBundleSoAReadCommittedConsumerSeesEveryRecordOnce(t *testing.T) {
	b := kafkatest.Shared(t)
	topic := b.NewTopic(t, 2)
	name := t.Name()
	c := newCollection(name)
	p, s := beam.NewPipelineWithRoot()
	beam.ParDo(s, &collectFn{Name: name}, Write(s, b.Addr, topic, beam.CreateList(s, keyedRecords(300)), Transactional("prism-test")))
	pr, err := runPipeline(t, p, 2*time.Minute)
	require.NoError(t, err)

	got := committedKeys(t, b, topic, 3*time.Second)
	assert.Len(t, got, 300, "every record committed")
	for k, n := range got {
		assert.Equal(t, 1, n, "record %s once", k)
	}
	assert.Len(t, c.records(), 300, "every record handed back once written")
	assert.Equal(t, int64(300), readCounters(pr).Written)
}

// fakeFlink is a Flink REST API with one running job, whose checkpoints
// the test completes.
type fakeFlink struct {
	triggered atomic.Int64 // Unix ms of the newest completed checkpoint's trigger; 0: none
	off       bool         // the job does not checkpoint
}

func (f *fakeFlink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/jobs/overview":
		json.NewEncoder(w).Encode(map[string]any{"jobs": []map[string]any{{"jid": "j1", "name": "txn-job", "state": "RUNNING", "start-time": 1}}})
	case "/jobs/j1/checkpoints/config":
		if f.off {
			http.Error(w, `{"errors":["Checkpointing is not enabled for this job (j1)."]}`, http.StatusNotFound)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"mode": "exactly_once", "interval": 2000})
	case "/jobs/j1/checkpoints":
		var history []map[string]any
		if t := f.triggered.Load(); t > 0 {
			history = append(history, map[string]any{"id": 1, "status": "COMPLETED", "trigger_timestamp": t})
		}
		json.NewEncoder(w).Encode(map[string]any{"history": history})
	default:
		http.NotFound(w, r)
	}
}

// writeOnFakeFlink writes 100 records with a transactional Write in a job
// whose workers take it for the Flink job txn-job with f as its REST API,
// and returns the broker and the topic.
func writeOnFakeFlink(t *testing.T, f *fakeFlink) (*kafkatest.Broker, string) {
	srv := httptest.NewServer(f)
	reset := func() {
		cpsOnce, cps = sync.Once{}, nil
	}
	reset()
	beam.PipelineOptions.Set("flink_job_name", "txn-job")
	beam.PipelineOptions.Set("flink_rest", srv.URL)
	t.Cleanup(func() {
		beam.PipelineOptions.Set("flink_job_name", "")
		beam.PipelineOptions.Set("flink_rest", "")
		reset()
		srv.Close()
	})
	b := kafkatest.Shared(t)
	topic := b.NewTopic(t, 2)
	p, s := beam.NewPipelineWithRoot()
	Write(s, b.Addr, topic, beam.CreateList(s, keyedRecords(100)), Transactional("flink-test"))
	_, err := runPipeline(t, p, 2*time.Minute)
	require.NoError(t, err)
	return b, topic
}

// On a Flink cluster the bundle's transaction stays open, its records
// invisible to a read_committed consumer, until a checkpoint triggered
// after the bundle's end has completed; then it is committed.
func TestTransactionalWriteOnFlinkCommitsABundleOnlyOnceACheckpointAfterItCompleted(t *testing.T) {
	f := &fakeFlink{}
	b, topic := writeOnFakeFlink(t, f)
	end, err := b.EndOffsets(context.Background(), topic)
	require.NoError(t, err)
	assert.Equal(t, int64(100), end[0]+end[1], "the records are in the log")

	assert.Empty(t, committedKeys(t, b, topic, 2*time.Second), "nothing committed before a checkpoint completed")
	f.triggered.Store(time.Now().Add(-time.Minute).UnixMilli())
	assert.Empty(t, committedKeys(t, b, topic, 2*time.Second), "nor after one triggered before the bundle ended")
	f.triggered.Store(time.Now().UnixMilli())
	got := committedKeys(t, b, topic, 3*time.Second)
	assert.Len(t, got, 100, "every record committed once a checkpoint after the bundle completed")
	for k, n := range got {
		assert.Equal(t, 1, n, "record %s once", k)
	}
}

// A Flink job that does not checkpoint commits each bundle's transaction
// at its end: no checkpoint would ever come.
func TestTransactionalWriteOnAFlinkJobWithoutCheckpointsCommitsEachBundleAtItsEnd(t *testing.T) {
	b, topic := writeOnFakeFlink(t, &fakeFlink{off: true})
	assert.Len(t, committedKeys(t, b, topic, 2*time.Second), 100, "every record committed")
}

package onflink_test

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/flink"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/beamdedup/beamdedup/internal/flinkopts"
	"github.com/beamdedup/beamdedup/internal/flinkrest"
	"github.com/beamdedup/beamdedup/internal/jobrun"
	"github.com/beamdedup/beamdedup/testing/flinktest"
	"github.com/beamdedup/beamdedup/testing/jobservertest"
	"github.com/beamdedup/beamdedup/testing/kafkatest"
	"github.com/beamdedup/beamdedup/transforms/kafkaio"
)

// TestMain starts the package's one Flink cluster on first use and stops
// it at the end; the broker is kafkatest's, one per test binary.
func TestMain(m *testing.M) {
	flag.Parse()
	beam.Init()
	flinktest.MainCluster(m)
}

// produce writes n keyed records to topic.
func produce(t *testing.T, b *kafkatest.Broker, topic string, from, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.DefaultProduceTopic(topic))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var recs []*kgo.Record
	for i := from; i < from+n; i++ {
		recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)})
	}
	require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())
}

// On Flink, kafkaio's ledger (keyed state) commits the group's offsets
// while the job runs, to the end of each partition, and a stop with a
// savepoint leaves them at the end of what the job read, with nothing to
// close: the job is never told it ends, unlike an IdleStop. At
// parallelism 2 the SDK workers are processes of both TaskManagers, so a
// record's marks reach its partition's ledger from another process than
// its reader's.
func TestOnFlink_TheGroupIsCommittedToTheEndWhileTheJobRunsAndAtAStopWithSavepoint(t *testing.T) {
	for _, parallelism := range []int{1, 2} {
		t.Run(fmt.Sprintf("parallelism %d", parallelism), func(t *testing.T) { testCommitOnFlink(t, parallelism) })
	}
}

func testCommitOnFlink(t *testing.T, parallelism int) {
	c := flinktest.SharedCluster(t)
	_, err := c.Replenish(2)
	require.NoError(t, err)
	b := kafkatest.Shared(t)
	in, out := b.NewTopic(t, 2), b.NewTopic(t, 2)
	group := fmt.Sprintf("on-flink-%d", parallelism)
	produce(t, b, in, 0, 300)
	written := b.Count(t, out)

	p, s := beam.NewPipelineWithRoot()
	recs := kafkaio.Read(s, b.Addr, in, kafkaio.Group(group))
	kafkaio.Commit(s, b.Addr, group, kafkaio.Write(s, b.Addr, out, recs))
	j := flinktest.Start(t, p, jobOptions(t, c, parallelism, flinkopts.Options{Streaming: true, CheckpointingInterval: 5 * time.Second, MaxParallelism: 8}))
	rest := flinkrest.New(c.REST)
	id := flinkJobID(t, j)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	end, err := b.EndOffsets(ctx, in)
	require.NoError(t, err)
	flinktest.Await(t, 3*time.Minute, "the group committed at the end of each partition", func() bool {
		committed, err := b.Committed(ctx, group, in)
		return err == nil && maps.Equal(committed, end)
	})
	cs, err := rest.Checkpoints(ctx, id)
	require.NoError(t, err)
	t.Logf("committed to the end with %d checkpoints completed", cs.Counts.Completed)

	produce(t, b, in, 300, 100)
	flinktest.Await(t, 2*time.Minute, "the 100 more records written", func() bool { return written.Total() >= 400 })
	_, err = j.StopWithSavepoint(ctx, "", 2*time.Minute)
	require.NoError(t, err)
	_, err = j.Wait()
	require.NoError(t, err, "a job stopped with a savepoint ends without an error")
	end, err = b.EndOffsets(ctx, in)
	require.NoError(t, err)
	committed, err := b.Committed(ctx, group, in)
	require.NoError(t, err)
	assert.Equal(t, end, committed, "committed at the end of each partition when the job ended")
}

// jobOptions are the options of a job of t on the cluster c at
// parallelism, with a deadline: its SDK workers in this process (LOOPBACK)
// at parallelism 1, else processes of the TaskManagers (PROCESS: Beam
// Go's boot loader fetches this test binary), since LOOPBACK workers serve
// one TaskManager (notes/beam-defects.md, 20).
func jobOptions(t *testing.T, c *flinktest.Cluster, parallelism int, flink flinkopts.Options) jobrun.Options {
	t.Helper()
	o := jobrun.Options{Runner: "flink", Endpoint: c.Endpoint, FlinkREST: c.REST, EnvironmentType: "LOOPBACK",
		StallLimit: -1, What: t.Name(), Parallelism: parallelism, Timeout: 5 * time.Minute, Flink: flink}
	if parallelism > 1 {
		exe, err := os.Executable()
		require.NoError(t, err)
		o.EnvironmentType, o.EnvironmentConfig, o.WorkerBinary = "PROCESS", fmt.Sprintf(`{"command":%q}`, jobservertest.BootInADirOfItsOwn(t)), exe
		jobservertest.RemoveBootCopies(t, exe)
	}
	return o
}

// flinkJobID waits for the job on the cluster and returns its id there.
func flinkJobID(t *testing.T, j *jobrun.Job) string {
	t.Helper()
	var id string
	flinktest.Await(t, 2*time.Minute, "the job on the cluster", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var err error
		id, err = j.FlinkJobID(ctx)
		return err == nil
	})
	return id
}

package flinktest_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/internal/flinkopts"
	"github.com/beamdedup/beamdedup/internal/flinkrest"
	"github.com/beamdedup/beamdedup/internal/jobrun"
	"github.com/beamdedup/beamdedup/testing/flinktest"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// Beam's Flink job server (2.62.0) cancels a job on a remote cluster by
// forgetting it: the Job API reports it CANCELLED and the Flink job runs
// on (notes/beam-defects.md, 19). jobrun cancels it on the cluster too.
// This test fails the day the job server cancels the Flink job.
func TestBeamDefect_TheJobAPIsCancelLeavesTheFlinkJobRunning(t *testing.T) {
	flinktest.SharedCluster(t) // started before the ticks' clock
	p, s := beam.NewPipelineWithRoot()
	dedup.KeepFirst(s, ticks(s, time.Hour), rowspec.PartitionBy("key"), dedup.UID("ticks"))
	j := start(t, p, jobrun.Options{})
	id := flinkJob(t, j)
	ctx := context.Background()
	name, err := rest(t).Job(ctx, id)
	require.NoError(t, err)
	// The Job API alone, as Beam's own clients cancel.
	r, err := jobrun.Follow(flinktest.SharedCluster(t).Endpoint, name.Name)
	require.NoError(t, err)
	defer r.Close()
	require.NoError(t, r.Cancel(ctx))
	jobs, err := jobrun.Jobs(ctx, flinktest.SharedCluster(t).Endpoint)
	require.NoError(t, err)
	for _, info := range jobs {
		if info.GetJobName() == name.Name {
			assert.Equal(t, "CANCELLED", info.GetState().String(), "the Job API's state")
		}
	}
	// Give a cancellation that was sent its time to arrive. The job lives
	// on: RUNNING, or RESTARTING once its LOOPBACK workers have gone with
	// the submission that the Job API ended.
	for range 10 {
		fj, err := rest(t).Job(ctx, id)
		require.NoError(t, err)
		require.NotContains(t, []string{"CANCELLING", "CANCELED"}, fj.State, "the Flink job after the Job API cancelled it")
		time.Sleep(500 * time.Millisecond)
	}
	// The job ends on the cluster: cancelled here, unless it failed first
	// (its restarts without workers used up).
	if fj, err := rest(t).Job(ctx, id); err == nil && !flinkrest.Terminal(fj.State) {
		if err := rest(t).Cancel(ctx, id); err != nil {
			// Flink's REST API caches a job's details for a few seconds.
			flinktest.Await(t, 30*time.Second, fmt.Sprintf("the job terminal after the cancel's %v", err), func() bool {
				fj, err := rest(t).Job(ctx, id)
				return err == nil && flinkrest.Terminal(fj.State)
			})
		}
	}
}

// Beam's LOOPBACK (and EXTERNAL) environment serves one TaskManager: each
// TaskManager's JVM numbers its SDK workers 1-1, 2-1, ... (a static
// counter of Beam's DefaultJobBundleFactory), and the submitting process's
// worker pool refuses a second worker of an id it already started. A job
// whose tasks run on two TaskManagers fails ("worker with ID \"1-1\"
// already exists") and restarts until Flink gives up
// (notes/beam-defects.md, 20): always with TaskManagers just started,
// by chance once their counters have moved apart. At parallelism 4 the
// job fills both TaskManagers' two slots. A PROCESS environment, or one worker pool
// per TaskManager, does not share ids. This test fails the day the ids
// are unique across TaskManagers.
func TestBeamDefect_LoopbackWorkersOfTwoTaskManagersCollide(t *testing.T) {
	c := flinktest.SharedCluster(t)
	// Fresh TaskManagers: the counters of two that ran other jobs may
	// differ, and their ids then meet only by chance.
	for _, tm := range c.TaskManagers() {
		tm.Kill()
	}
	_, err := c.Replenish(2)
	require.NoError(t, err)
	p, s := beam.NewPipelineWithRoot()
	dedup.KeepFirst(s, ticks(s, time.Hour), rowspec.PartitionBy("key"), dedup.UID("ticks"))
	j := start(t, p, jobrun.Options{Parallelism: 4, StallLimit: -1})
	ctx := context.Background()
	var failures []string
	flinktest.Await(t, 2*time.Minute, "a task failure whose cause is a worker id in use", func() bool {
		id, err := j.FlinkJobID(ctx)
		if err != nil {
			return false
		}
		if failures, err = exceptions(ctx, rest(t), id); err != nil {
			return false
		}
		for _, f := range failures {
			if strings.Contains(f, "already exists") {
				return true
			}
		}
		return false
	})
	for _, f := range failures {
		for _, l := range strings.Split(f, "\n") {
			if strings.Contains(l, "already exists") {
				assert.Regexp(t, `worker with ID "\d+-\d+" already exists`, l)
				return
			}
		}
	}
}

// Beam's Flink runner (2.62.0) registers a keyed state for every
// resumption of a splittable source and never releases it
// (apache/beam#27648), and the heap state backend refuses to snapshot more
// than 32,767 (notes/beam-defects.md, 22): on Beam's runner as released
// (the Go option stock_flink_runner=true), a source resumed at once, 200
// restrictions at a time, makes a TaskManager fail its checkpoints with
// "Too many states" within seconds, at 8 key groups (at the cluster's 128,
// each state's table per key group fills the TaskManager's heap first,
// OutOfMemoryError, which takes the TaskManager down for the next tests).
// The job server's own operator keeps
// them in one state (TestResumes_CheckpointsKeepCompletingPast40000ResumesOfOneSource).
// This test fails the day Beam's runner keeps them bounded.
func TestBeamDefect_TheStockRunnerRegistersAStatePerResumeAndItsCheckpointsFailPast32767(t *testing.T) {
	c := flinktest.SharedCluster(t)
	fast := spinSpec{Name: "stock-fast", Parts: 200, Each: 2000}
	p, s := beam.NewPipelineWithRoot()
	spin(s, fast)
	restore := goOptions(map[string]string{"max_bundle_time_mills": "5", "stock_flink_runner": "true"})
	// Every TaskManager's log, a lost one's included (the one running the
	// job may be replaced meanwhile), from where it stands now.
	logs := filepath.Join(c.Dir, "taskmanager-*.log")
	from := map[string]int{}
	existing, err := filepath.Glob(logs)
	require.NoError(t, err)
	for _, l := range existing {
		if b, err := os.ReadFile(l); err == nil {
			from[l] = len(b)
		}
	}
	j := start(t, p, jobrun.Options{StallLimit: -1, Flink: flinkopts.Options{Streaming: true, CheckpointingInterval: time.Second, MaxParallelism: 8}})
	flinkJob(t, j)
	restore()
	var declined string
	flinktest.Await(t, 4*time.Minute, "a TaskManager refusing to snapshot too many states", func() bool {
		all, _ := filepath.Glob(logs)
		for _, l := range all {
			b, err := os.ReadFile(l)
			if err != nil {
				continue
			}
			for _, line := range strings.Split(string(b[min(from[l], len(b)):]), "\n") {
				if strings.Contains(line, "Too many states") {
					declined = line
					return true
				}
			}
		}
		return false
	})
	assert.Regexp(t, `Too many states: \d+\. Currently at most 32767 states are supported`, declined)
	t.Logf("%d resumes: %s", len(resumes.of(fast.Name)), strings.TrimSpace(declined))
}

// Without checkpoints Beam's runner (2.62.0) ends a job's impulse at once,
// and a splittable source's stage meets its end of input while the source
// still runs: ExecutableStageDoFnOperator.flushData then fires its
// resumptions as fast as it can, whatever delay the source asked for,
// until the source ends (notes/beam-defects.md, 26). On Beam's runner as
// released, a source that claims a position a call and asks for 1 s
// between them has its 20 calls within a few seconds instead of 19 s; the
// job server's impulse waits for the source, whose resumptions keep their
// delays (TestResumes_CheckpointsKeepCompletingPast40000ResumesOfOneSource,
// the paced source). This test fails the day Beam's runner waits.
func TestBeamDefect_WithoutCheckpointsTheStockRunnerResumesASourceAtOnceAtEndOfInput(t *testing.T) {
	paced := spinSpec{Name: "stock-paced", Parts: 1, Each: 20, DelayMs: 1000}
	p, s := beam.NewPipelineWithRoot()
	spin(s, paced)
	restore := goOptions(map[string]string{"stock_flink_runner": "true"})
	j := start(t, p, jobrun.Options{StallLimit: -1, Flink: flinkopts.Options{Streaming: true, CheckpointingInterval: flinkopts.NoCheckpoints}})
	_, err := j.Wait()
	restore()
	require.NoError(t, err)
	calls := resumes.of(paced.Name)
	require.Len(t, calls, 20, "a call a position")
	span := calls[len(calls)-1].Sub(calls[0])
	assert.Less(t, span, 5*time.Second, "20 calls that each asked for 1 s before the next")
	t.Logf("20 calls that each asked for 1 s before the next, in %v", span.Round(time.Millisecond))
}

// Beam's runner (2.62.0) gives the impulse that starts every Go source
// (FlinkStreamingPortablePipelineTranslator.translateImpulse) no operator
// uid, so Flink derives its operator's id from the job graph, chaining
// included, and that changes with the parallelism (at parallelism 1 the
// impulse is chained to the stage it feeds, at 2 not): the impulse's state
// maps to no operator of the rescaled job (notes/beam-defects.md, 23). On
// Beam's runner as released, a job stopped with a savepoint at
// parallelism 1 and submitted from it at parallelism 2 is refused, naming
// the impulse's vertex. With allow_non_restored_state it would start, its
// impulse emit again and its splittable sources start over beside the
// restrictions they resume. The job server gives each impulse a uid
// (TestRescale_FromASavepoint1To2To1FindsEveryKeysState restores without
// that flag). This test fails the day Beam's runner gives the impulse one.
func TestBeamDefect_TheStockRunnersImpulseHasNoUIDSoARescaledRestoreIsRefused(t *testing.T) {
	flinktest.SharedCluster(t) // started before the ticks' clock
	build := func() *beam.Pipeline {
		p, s := beam.NewPipelineWithRoot()
		dedup.KeepFirst(s, ticks(s, time.Hour), rowspec.PartitionBy("key"), dedup.UID("ticks"))
		return p
	}
	restore := goOptions(map[string]string{"stock_flink_runner": "true"})
	defer restore()
	o := jobrun.Options{StallLimit: -1, Parallelism: 1, Flink: flinkopts.Options{Streaming: true, CheckpointingInterval: time.Second, MaxParallelism: 8}}
	j := start(t, build(), o)
	before := flinkJob(t, j)
	ctx := context.Background()
	path, err := j.StopWithSavepoint(ctx, "", time.Minute)
	require.NoError(t, err)
	o.Parallelism, o.Flink.SavepointPath = 2, path
	_, err = start(t, build(), o).Wait()
	require.Error(t, err, "a rescaled job from a savepoint without allow_non_restored_state")
	m := regexp.MustCompile(`Cannot map checkpoint/savepoint state for operator ([0-9a-f]{32}) to the new program`).FindStringSubmatch(err.Error())
	require.NotNil(t, m, "Flink's restore error: %v", err)
	fj, err := rest(t).Job(ctx, before)
	require.NoError(t, err)
	i := slices.IndexFunc(fj.Vertices, func(v flinkrest.Vertex) bool { return v.ID == m[1] })
	require.GreaterOrEqual(t, i, 0, "operator %s is a vertex of the job before", m[1])
	assert.True(t, strings.HasPrefix(fj.Vertices[i].Name, "Source: Impulse"), "the state not mapped is the impulse's: %s", fj.Vertices[i].Name)
}

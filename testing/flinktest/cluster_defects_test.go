package flinktest_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/internal/jobrun"
	"github.com/beamdedup/beamdedup/pipelines/jobrun/flinkopts"
	"github.com/beamdedup/beamdedup/pipelines/jobrun/flinkrest"
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
			await(t, 30*time.Second, fmt.Sprintf("the job terminal after the cancel's %v", err), func() bool {
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
	await(t, 2*time.Minute, "a task failure whose cause is a worker id in use", func() bool {
		id, err := j.FlinkJobID(ctx)
		if err != nil {
			return false
		}
		if failures, err = rest(t).Exceptions(ctx, id); err != nil {
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
	j := start(t, p, jobrun.Options{StallLimit: -1, Flink: flinkopts.Options{Streaming: true, CheckpointingInterval: time.Second, MaxParallelism: 8}})
	flinkJob(t, j)
	restore()
	var declined string
	await(t, 2*time.Minute, "a TaskManager refusing to snapshot too many states", func() bool {
		for _, tm := range c.TaskManagers() {
			for _, l := range strings.Split(tm.Output(), "\n") {
				if strings.Contains(l, "Too many states") {
					declined = l
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
// until the source ends (notes/beam-defects.md, 23). On Beam's runner as
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

// With checkpoints on, a snapshot that comes while the impulse's stage
// has its first bundle open (it stays open for the bundle time unless a
// snapshot ends it) buffers that bundle's one output, a splittable
// source's restriction, in the operator's snapshot buffer, while the
// stage's final watermark goes out at once; the buffer is flushed only
// by a later watermark or bundle, which that stage never gets: the source
// never starts (notes/beam-defects.md, 24). A checkpoint every 100 ms
// against a bundle time of 10 s makes the snapshot come first; with
// finish_bundle_before_checkpointing=false the source has not run after
// three checkpoints, with the job server's default (true) it runs. This
// test fails the day Beam's runner flushes the buffer.
func TestBeamDefect_ACheckpointBeforeTheImpulsesFirstBundleEndsKeepsASourceFromStarting(t *testing.T) {
	for _, tc := range []struct {
		finish string
		starts bool
	}{{"false", false}, {"", true}} {
		t.Run("finish_bundle_before_checkpointing="+tc.finish, func(t *testing.T) {
			spec := spinSpec{Name: "race-" + tc.finish, Parts: 1, Each: 1000, DelayMs: 100}
			p, s := beam.NewPipelineWithRoot()
			spin(s, spec)
			restore := goOptions(map[string]string{"max_bundle_time_mills": "10000", "finish_bundle_before_checkpointing": tc.finish})
			j := start(t, p, jobrun.Options{StallLimit: -1, Flink: flinkopts.Options{Streaming: true, CheckpointingInterval: 100 * time.Millisecond}})
			id := flinkJob(t, j)
			restore()
			await(t, time.Minute, "three completed checkpoints", func() bool {
				cp, err := rest(t).Checkpoints(context.Background(), id)
				return err == nil && cp.Counts.Completed >= 3
			})
			if tc.starts {
				await(t, time.Minute, "the source's first call", func() bool { return len(resumes.of(spec.Name)) > 0 })
				return
			}
			assert.Empty(t, resumes.of(spec.Name), "calls of the source after three checkpoints")
		})
	}
}

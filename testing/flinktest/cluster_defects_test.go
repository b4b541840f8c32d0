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

	"github.com/beamdedup/beamdedup/pipelines/jobrun"
	"github.com/beamdedup/beamdedup/pipelines/jobrun/flinkrest"
	"github.com/beamdedup/beamdedup/testing/flinktest"
	"github.com/beamdedup/beamdedup/transforms/dedup"
)

// Beam's Flink job server (2.62.0) cancels a job on a remote cluster by
// forgetting it: the Job API reports it CANCELLED and the Flink job runs
// on (notes/beam-defects.md, 19). jobrun cancels it on the cluster too.
// This test fails the day the job server cancels the Flink job.
func TestBeamDefect_TheJobAPIsCancelLeavesTheFlinkJobRunning(t *testing.T) {
	flinktest.SharedCluster(t) // started before the ticks' clock
	p, s := beam.NewPipelineWithRoot()
	dedup.KeepFirst(s, ticks(s, time.Hour), dedup.PartitionBy("key"), dedup.UID("ticks"))
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
	dedup.KeepFirst(s, ticks(s, time.Hour), dedup.PartitionBy("key"), dedup.UID("ticks"))
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

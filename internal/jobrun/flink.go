package jobrun

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/beamdedup/beamdedup/internal/flinkrest"
)

// FlinkJobID returns the id of the job on the Flink cluster
// (Options.FlinkREST), once the job server has submitted it there.
func (j *Job) FlinkJobID(ctx context.Context) (string, error) {
	if j.flink == nil {
		return "", fmt.Errorf("jobrun: %s is not followed on a Flink cluster (runner flink with Options.FlinkREST)", j.o.What)
	}
	j.mu.Lock()
	id := j.flinkID
	j.mu.Unlock()
	if id != "" {
		return id, nil
	}
	// The job server names the Flink job as it lists the job.
	name, err := j.remote.ListedName(ctx)
	if err != nil {
		return "", err
	}
	fj, err := j.flink.FindJob(ctx, name)
	if err != nil {
		return "", err
	}
	j.mu.Lock()
	j.flinkID = fj.ID
	j.mu.Unlock()
	return fj.ID, nil
}

// Flink is the REST client of the job's Flink cluster, nil when the job
// is not followed there.
func (j *Job) Flink() *flinkrest.Client { return j.flink }

// StopWithSavepoint stops the job on its Flink cluster with a savepoint
// into dir (a URI; empty: the cluster's state.savepoints.dir), without
// draining: the sources stop where they are, timers and windows stay
// pending in the savepoint. It returns the savepoint's path, which a new
// submission restores (flinkopts.Options.SavepointPath); Wait then
// returns the job's end without an error of its own.
func (j *Job) StopWithSavepoint(ctx context.Context, dir string, timeout time.Duration) (string, error) {
	id, err := j.FlinkJobID(ctx)
	if err != nil {
		return "", err
	}
	if !j.claimStop(errCancelled) {
		return "", errors.New("jobrun: the job is already being stopped")
	}
	path, err := j.flink.StopWithSavepoint(ctx, id, dir, timeout)
	if err != nil {
		return "", err
	}
	j.abandonAfterGrace(errCancelled)
	return path, nil
}

// progressMetric reports whether a Flink metric id counts a step's work:
// the element counts of the SDK's PCollections (which Beam's runner
// updates with every bundle an SDK worker finishes) and Flink's records in
// and out. Gauges (rates, watermarks, busy time) move in an idle job too.
func progressMetric(id string) bool {
	return strings.HasSuffix(id, "_metric_element_count_v1") ||
		id == "numRecordsIn" || id == "numRecordsOut"
}

// flinkSample observes the job on its Flink cluster: its state, its
// subtasks' states and what each running task has counted. Any of them
// that moves is progress: a subtask deployed or started (a job's start
// takes seconds with nothing counted), a worker that finishes a bundle
// (its step's element counts).
func (j *Job) flinkSample(ctx context.Context) (Sample, error) {
	id, err := j.FlinkJobID(ctx)
	if err != nil {
		// Not submitted yet: the job server translates, or has not reached
		// the cluster.
		return Sample{Pending: true, Counters: map[string]int64{}, Note: "the job did not reach the Flink cluster at " + j.o.FlinkREST}, nil
	}
	fj, err := j.flink.Job(ctx, id)
	if err != nil {
		return Sample{}, err
	}
	var total int64
	var running []string
	for _, v := range fj.Vertices {
		total += v.Metrics.ReadRecords + v.Metrics.WriteRecords
		if v.Status != "RUNNING" {
			continue
		}
		m, err := j.flink.VertexMetrics(ctx, id, v.ID, progressMetric)
		if err != nil {
			return Sample{}, err
		}
		var n int64
		for _, x := range m {
			n += int64(x)
		}
		total += n
		running = append(running, fmt.Sprintf("%q (%d elements and records)", short(v.Name, 100), n))
	}
	slices.Sort(running)
	note := fmt.Sprintf("no task of Flink job %s (%s) counted an element or a record", id, fj.State)
	if len(running) > 0 {
		note += "; running: " + strings.Join(running, ", ")
	}
	counters := map[string]int64{"flink elements and records": total}
	for state, n := range fj.StatusCounts {
		if n > 0 {
			counters["flink subtasks "+strings.ToLower(state)] = int64(n)
		}
	}
	return Sample{
		Counters: counters,
		Pending:  !flinkrest.Terminal(fj.State),
		Note:     note,
	}, nil
}

func short(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

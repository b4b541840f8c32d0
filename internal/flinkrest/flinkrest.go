// Package flinkrest reads a Flink 1.19 JobManager's REST API for what
// Beam's Job API does not give a Go job on Flink: its metrics while it runs
// (the Job API gets them only when the job ends), its checkpoints, its
// options, and stop-with-savepoint (the Job API can only cancel).
package flinkrest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"
)

// Client reads the REST API at Addr ("host:port", the address the job
// server's --flink-master names).
type Client struct {
	Addr string
	HTTP *http.Client // nil: http.DefaultClient
}

// New returns a client of the REST API at addr ("host:port" or a URL).
func New(addr string) *Client {
	addr = strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(addr, "http://"), "https://"), "/")
	return &Client{Addr: addr}
}

// Get reads path ("/overview") into out, as JSON.
func (c *Client) Get(ctx context.Context, path string, out any) error {
	return c.do(ctx, http.MethodGet, path, nil, out)
}

func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+c.Addr+path, r)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := cmp.Or(c.HTTP, http.DefaultClient).Do(req)
	if err != nil {
		return fmt.Errorf("flink REST API at %s: %w", c.Addr, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("flink REST API at %s: %s %s: %s: %s", c.Addr, method, path, resp.Status, strings.TrimSpace(string(b)))
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(b, out)
}

// JobOverview is a job as /jobs/overview lists it.
type JobOverview struct {
	ID    string `json:"jid"`
	Name  string `json:"name"`
	State string `json:"state"`
	Start int64  `json:"start-time"`
}

// Terminal reports whether the job has ended (FINISHED, FAILED,
// CANCELED).
func (j JobOverview) Terminal() bool { return Terminal(j.State) }

// Terminal reports whether a job state is final.
func Terminal(state string) bool {
	switch state {
	case "FINISHED", "FAILED", "CANCELED":
		return true
	}
	return false
}

// Jobs lists the cluster's jobs, newest first.
func (c *Client) Jobs(ctx context.Context) ([]JobOverview, error) {
	var o struct {
		Jobs []JobOverview `json:"jobs"`
	}
	if err := c.Get(ctx, "/jobs/overview", &o); err != nil {
		return nil, err
	}
	sort.Slice(o.Jobs, func(i, k int) bool { return o.Jobs[i].Start > o.Jobs[k].Start })
	return o.Jobs, nil
}

// FindJob returns the newest job called name (Beam's job server names a
// Flink job as it lists it on the Job API); a job that has not reached the
// cluster yet is an error.
func (c *Client) FindJob(ctx context.Context, name string) (JobOverview, error) {
	jobs, err := c.Jobs(ctx)
	if err != nil {
		return JobOverview{}, err
	}
	for _, j := range jobs {
		if j.Name == name {
			return j, nil
		}
	}
	return JobOverview{}, fmt.Errorf("no job %s on the Flink cluster at %s", name, c.Addr)
}

// Vertex is one task of a job's graph (a chain of operators).
type Vertex struct {
	ID             string `json:"id"`
	Name           string `json:"name"`
	Parallelism    int    `json:"parallelism"`
	MaxParallelism int    `json:"maxParallelism"`
	Status         string `json:"status"`
	Metrics        struct {
		ReadRecords  int64 `json:"read-records"`
		WriteRecords int64 `json:"write-records"`
	} `json:"metrics"`
}

// Job is a job's details.
type Job struct {
	ID             string   `json:"jid"`
	Name           string   `json:"name"`
	State          string   `json:"state"`
	MaxParallelism int      `json:"maxParallelism"`
	Vertices       []Vertex `json:"vertices"`
	// StatusCounts counts the job's subtasks by state (CREATED,
	// SCHEDULED, DEPLOYING, INITIALIZING, RUNNING, FINISHED, ...).
	StatusCounts map[string]int `json:"status-counts"`
}

// Running reports whether the job is RUNNING with every task running or
// finished (a source's impulse may end while the job runs).
func (j Job) Running() bool {
	if j.State != "RUNNING" {
		return false
	}
	for _, v := range j.Vertices {
		if v.Status != "RUNNING" && v.Status != "FINISHED" {
			return false
		}
	}
	return true
}

// Job returns a job's details.
func (c *Client) Job(ctx context.Context, id string) (Job, error) {
	var j Job
	return j, c.Get(ctx, "/jobs/"+id, &j)
}

// Cancel cancels a job.
func (c *Client) Cancel(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodPatch, "/jobs/"+id+"?mode=cancel", nil, nil)
}

// VertexMetrics returns the metrics of a vertex summed over its subtasks,
// those whose ids keep reports true (nil: all), by id ("<operator>.<name>"
// for an operator's, with Flink's spaces, dots, colons and commas made
// underscores).
func (c *Client) VertexMetrics(ctx context.Context, job, vertex string, keep func(id string) bool) (map[string]float64, error) {
	path := "/jobs/" + job + "/vertices/" + vertex + "/subtasks/metrics"
	var ids []struct {
		ID string `json:"id"`
	}
	if err := c.Get(ctx, path, &ids); err != nil {
		return nil, err
	}
	var want []string
	for _, m := range ids {
		if keep == nil || keep(m.ID) {
			want = append(want, m.ID)
		}
	}
	out := map[string]float64{}
	// A URL holds some thousands of characters: ask in batches.
	for len(want) > 0 {
		n, size := 0, 0
		for n < len(want) && size < 1500 {
			size += len(want[n]) + 1
			n++
		}
		var vals []struct {
			ID  string   `json:"id"`
			Sum *float64 `json:"sum"`
		}
		q := url.Values{"get": {strings.Join(want[:n], ",")}, "agg": {"sum"}}
		if err := c.Get(ctx, path+"?"+q.Encode(), &vals); err != nil {
			return nil, err
		}
		for _, v := range vals {
			if v.Sum != nil {
				out[v.ID] = *v.Sum
			}
		}
		want = want[n:]
	}
	return out, nil
}

// Subtask is one parallel instance of a vertex: its state, the
// TaskManager it runs on (its resource id) and what it read and wrote
// over the network.
type Subtask struct {
	Index       int    `json:"subtask"`
	Status      string `json:"status"`
	TaskManager string `json:"taskmanager-id"`
	Metrics     struct {
		ReadRecords  int64 `json:"read-records"`
		WriteRecords int64 `json:"write-records"`
	} `json:"metrics"`
}

// Subtasks returns the subtasks of a job's vertex.
func (c *Client) Subtasks(ctx context.Context, job, vertex string) ([]Subtask, error) {
	var d struct {
		Subtasks []Subtask `json:"subtasks"`
	}
	return d.Subtasks, c.Get(ctx, "/jobs/"+job+"/vertices/"+vertex, &d)
}

// Checkpoint is one checkpoint or savepoint. Times are Unix
// milliseconds; a field Flink does not give for an entry is zero (a
// restored one has no trigger time, a completed one no restore time).
type Checkpoint struct {
	ID           int64  `json:"id"`
	Status       string `json:"status"` // IN_PROGRESS, COMPLETED, FAILED
	ExternalPath string `json:"external_path"`
	IsSavepoint  bool   `json:"is_savepoint"`
	// Triggered is when the JobManager triggered it: every row a step
	// emitted after its barrier passed the step is emitted again by a job
	// restored from it.
	Triggered int64 `json:"trigger_timestamp"`
	// Restored is when a job restored it.
	Restored int64 `json:"restore_timestamp"`
	// FailureMessage says why a failed one failed.
	FailureMessage string `json:"failure_message"`
}

// Checkpoints is what a job's checkpoints are.
type Checkpoints struct {
	Counts struct {
		Completed int `json:"completed"`
		Failed    int `json:"failed"`
		// Restored counts the job's restores: from its savepoint, and from
		// a checkpoint after each failure.
		Restored int `json:"restored"`
	} `json:"counts"`
	Latest struct {
		Completed *Checkpoint `json:"completed"`
		Restored  *Checkpoint `json:"restored"`
		Failed    *Checkpoint `json:"failed"`
	} `json:"latest"`
	// History is the last checkpoints, newest first (Flink keeps
	// web.checkpoints.history of them, 10 by default).
	History []Checkpoint `json:"history"`
}

// Find returns the checkpoint of the history with that id.
func (cs Checkpoints) Find(id int64) (Checkpoint, bool) {
	for _, c := range cs.History {
		if c.ID == id {
			return c, true
		}
	}
	return Checkpoint{}, false
}

// Checkpoints returns a job's checkpoint statistics.
func (c *Client) Checkpoints(ctx context.Context, job string) (Checkpoints, error) {
	var cp Checkpoints
	return cp, c.Get(ctx, "/jobs/"+job+"/checkpoints", &cp)
}

// StopWithSavepoint stops a job with a savepoint into dir (a URI; empty:
// the cluster's state.savepoints.dir) and returns the savepoint's path
// once Flink has written it, at most timeout. It does not drain: the job
// stops as it is (no final watermark), for a resubmission that resumes it.
func (c *Client) StopWithSavepoint(ctx context.Context, job, dir string, timeout time.Duration) (string, error) {
	body := map[string]any{"drain": false}
	if dir != "" {
		body["targetDirectory"] = dir
	}
	var trig struct {
		ID string `json:"request-id"`
	}
	if err := c.do(ctx, http.MethodPost, "/jobs/"+job+"/stop", body, &trig); err != nil {
		return "", err
	}
	deadline := time.Now().Add(timeout)
	for {
		var st struct {
			Status struct {
				ID string `json:"id"`
			} `json:"status"`
			Operation struct {
				Location     string `json:"location"`
				FailureCause struct {
					Stack string `json:"stack-trace"`
				} `json:"failure-cause"`
			} `json:"operation"`
		}
		if err := c.Get(ctx, "/jobs/"+job+"/savepoints/"+trig.ID, &st); err != nil {
			return "", err
		}
		if st.Status.ID == "COMPLETED" {
			if st.Operation.Location == "" {
				return "", fmt.Errorf("stop-with-savepoint of job %s failed: %s", job, firstLines(st.Operation.FailureCause.Stack, 6))
			}
			return st.Operation.Location, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("stop-with-savepoint of job %s did not complete within %v", job, timeout)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}

// ClusterConfig returns the JobManager's configuration (state.savepoints.dir,
// state.checkpoints.dir, ...), as /jobmanager/config lists it.
func (c *Client) ClusterConfig(ctx context.Context) (map[string]string, error) {
	var entries []struct {
		Key   string `json:"key"`
		Value string `json:"value"`
	}
	if err := c.Get(ctx, "/jobmanager/config", &entries); err != nil {
		return nil, err
	}
	conf := make(map[string]string, len(entries))
	for _, e := range entries {
		conf[e.Key] = e.Value
	}
	return conf, nil
}

package flinktest_test

import (
	"context"

	"github.com/beamdedup/beamdedup/internal/flinkrest"
)

// What only these tests read of Flink's REST API.

// checkpointCfg is a job's checkpointing as Flink runs it.
type checkpointCfg struct {
	Mode              string `json:"mode"` // "exactly_once", "at_least_once"
	Interval          int64  `json:"interval"`
	Timeout           int64  `json:"timeout"`
	StateBackend      string `json:"state_backend"`
	CheckpointStorage string `json:"checkpoint_storage"`
	// Externalization: whether the job's latest checkpoint is kept when
	// the job is cancelled (or fails for good).
	Externalization struct {
		Enabled              bool `json:"enabled"`
		DeleteOnCancellation bool `json:"delete_on_cancellation"`
	} `json:"externalization"`
}

// checkpointConfig returns a job's checkpointing configuration; a job
// without checkpointing is an error (Flink answers 404).
func checkpointConfig(ctx context.Context, c *flinkrest.Client, job string) (checkpointCfg, error) {
	var cc checkpointCfg
	return cc, c.Get(ctx, "/jobs/"+job+"/checkpoints/config", &cc)
}

// jobCfg is the execution configuration a job runs with.
type jobCfg struct {
	Parallelism int               `json:"job-parallelism"`
	User        map[string]string `json:"user-config"`
}

// jobConfig returns a job's execution configuration.
func jobConfig(ctx context.Context, c *flinkrest.Client, job string) (jobCfg, error) {
	var o struct {
		Exec jobCfg `json:"execution-config"`
	}
	return o.Exec, c.Get(ctx, "/jobs/"+job+"/config", &o)
}

// exceptions returns the stack traces of a job's task failures, newest
// first, their causes included (none: no failure yet).
func exceptions(ctx context.Context, c *flinkrest.Client, job string) ([]string, error) {
	var e struct {
		History struct {
			Entries []struct {
				Stack string `json:"stacktrace"`
			} `json:"entries"`
		} `json:"exceptionHistory"`
	}
	if err := c.Get(ctx, "/jobs/"+job+"/exceptions", &e); err != nil {
		return nil, err
	}
	var out []string
	for _, x := range e.History.Entries {
		out = append(out, x.Stack)
	}
	return out, nil
}

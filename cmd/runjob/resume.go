package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode"

	"github.com/beamdedup/beamdedup/internal/flinkrest"
	"github.com/beamdedup/beamdedup/internal/jobrun"
	"github.com/beamdedup/beamdedup/pipelines/streaming"
)

// resumeOnFlink makes a Kafka run on a Flink cluster whose state
// directories are on this machine (--flink_rest, a local cluster) start
// from the newest state its pipeline left there and stop with a savepoint
// (on Ctrl-C, and at an --idle_stop end),
// so that a one-machine deployment remembers across restarts as a cluster
// does: its state directories are named after the group, an earlier job
// of it still on the cluster (its runjob killed) is cancelled first, and
// the newest of the pipeline's savepoints and retained checkpoints is
// restored unless --savepoint_path names one. Elsewhere, or with --resume=false, the run is
// left as it is.
func resumeOnFlink(ctx context.Context, o *options, job *jobrun.Options, cfg *streaming.RunConfig, stderr io.Writer) error {
	if o.runner != "flink" || o.flinkREST == "" || !o.kafka.resume {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	rest := flinkrest.New(o.flinkREST)
	// The name of the state directories: the group's, each character
	// outside [A-Za-z0-9._-] an underscore.
	name := "runjob-kafka-" + strings.Map(func(c rune) rune {
		if c < 128 && (unicode.IsLetter(c) || unicode.IsDigit(c) || strings.ContainsRune("._-", c)) {
			return c
		}
		return '_'
	}, o.kafka.group)
	r, err := jobrun.FindResume(ctx, rest, name)
	if err != nil {
		return fmt.Errorf("--resume: %w (or --resume=false to start with no state)", err)
	}
	earlier, err := r.CancelEarlier(ctx, rest)
	if err != nil {
		return fmt.Errorf("--resume: %w", err)
	}
	for _, id := range earlier {
		fmt.Fprintf(stderr, "runjob: cancelled the earlier job %s of group %s, still on the cluster (its runjob ended without stopping it)\n", id, o.kafka.group)
	}
	latest, err := r.Latest()
	if err != nil {
		return fmt.Errorf("--resume: %w", err)
	}
	r.Apply(&job.Flink, latest)
	cfg.Savepoints = r.Savepoints
	switch {
	case job.Flink.SavepointPath == "":
		fmt.Fprintf(stderr, "runjob: no savepoint or retained checkpoint of group %s in %s or %s: starting with no state\n", o.kafka.group, r.Savepoints, r.Checkpoints)
	default:
		fmt.Fprintf(stderr, "runjob: restoring %s\n", job.Flink.SavepointPath)
	}
	return nil
}

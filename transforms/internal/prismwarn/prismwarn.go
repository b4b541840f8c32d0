// Package prismwarn is the stateful transforms' warning when their job
// may run on Prism with its bundle splitting on (package prismsplit).
package prismwarn

import (
	"context"
	"flag"
	"fmt"
	"sync"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"

	"github.com/beamdedup/beamdedup/internal/prismexp"
	"github.com/beamdedup/beamdedup/transforms/prismsplit"
)

// Phase is when Check runs.
type Phase int

// Phases: a stateful step added to a pipeline, or set up in a worker.
const (
	Construction Phase = iota
	Run
)

var warned [2]sync.Once

// Check warns, once per process and phase, when a job this process
// submits may run on Prism with its bundle splitting on: --experiments
// lacks prismsplit.Experiment and --runner may be Prism, or is not set.
// step names the stateful step. It reports whether the job is at risk. At
// Run it says nothing in a worker process of its own, which does not see
// the job's experiments.
func Check(ctx context.Context, p Phase, step string) bool {
	if p == Run && flagValue("worker") == "true" { // an SDK worker started by a runner
		return false
	}
	runner := flagValue("runner")
	if prismexp.Disabled() || (runner != "" && !prismexp.MayBePrism(runner)) {
		return false
	}
	warned[p].Do(func() { log.Warn(ctx, warning(p, step, runner)) })
	return true
}

func warning(p Phase, step, runner string) string {
	on := "--runner is not set, so beamx.Run and ptest run it on Prism"
	if runner != "" {
		on = "--runner=" + runner + " may be Prism"
	}
	when := "is built into a pipeline"
	if p == Run {
		when = "is running"
	}
	return fmt.Sprintf("WARNING: beamdedup: %s keeps per-key state and %s without --experiments=%s (%s). "+
		"Under load Prism (Beam Go v2.77.0) splits a stateful bundle in the middle of a key and runs the rest of the key "+
		"at once on stale state, so a key can be emitted twice. Run the job with --experiments=%s, or call prismsplit.Disable() "+
		"after flag.Parse (docs/testing.md; notes/beam-defects.md, entry 9). On Dataflow or Flink this does not apply: pass --runner.",
		step, when, prismsplit.Experiment, on, prismsplit.Experiment)
}

// flagValue is the value of the global flag name, or "" when no package
// defined it.
func flagValue(name string) string {
	if f := flag.Lookup(name); f != nil {
		return f.Value.String()
	}
	return ""
}

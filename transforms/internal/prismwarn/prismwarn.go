// Package prismwarn is the warning of the transforms that keep per-key
// state when their job may run on Prism with its bundle splitting on
// (package prismsplit has the defect and its fix): once per process, at
// construction and when their step starts in a worker.
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

// Phases.
const (
	// Construction: a stateful step is added to a pipeline.
	Construction Phase = iota
	// Run: a stateful step's DoFn is set up in a worker.
	Run
)

var warned [2]sync.Once

// Check warns, once per process and phase, with Beam's logger at warning
// level, when a job this process submits may run on Prism with its bundle
// splitting on: --experiments lacks prismsplit.Experiment and --runner
// names a runner that may be Prism, or no runner (beamx.Run and ptest then
// run Prism).
// step names the stateful step ("dedup.KeepFirst UID ..."). It reports
// whether the job is at risk.
//
// At Run it checks only a worker running in the process that submitted the
// job (LOOPBACK, the default on Prism), whose flags are the submission's;
// a worker process of its own does not see the job's experiments, and
// Check then says nothing.
func Check(ctx context.Context, p Phase, step string) bool {
	if p == Run && inWorkerProcess() {
		return false
	}
	runner := flagValue("runner")
	if prismexp.Disabled() || (runner != "" && !prismexp.MayBePrism(runner)) {
		return false
	}
	warned[p].Do(func() { log.Warn(ctx, warning(p, step, runner)) })
	return true
}

// warning is Check's message.
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

// inWorkerProcess reports whether this process is an SDK worker started by
// a runner (Beam's --worker, which beam.Init reads), not the program that
// submitted the job.
func inWorkerProcess() bool { return flagValue("worker") == "true" }

// flagValue is the value of the global flag name, or "" when no package
// defined it.
func flagValue(name string) string {
	if f := flag.Lookup(name); f != nil {
		return f.Value.String()
	}
	return ""
}

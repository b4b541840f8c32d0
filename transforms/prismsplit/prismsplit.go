// Package prismsplit is the workaround for a defect of Prism, the local
// runner of Beam Go v2.77.0 (and the default runner of beamx.Run and
// ptest): under load Prism splits a running bundle of a stateful step in
// the middle of a key and runs the key's remaining rows at once in a second
// bundle, on the key's state as it was before the first bundle wrote it. A
// dedup step then emits the key twice. The experiment
// prism_disable_sdf_split turns Prism's splitting off (for every stage;
// splits only rebalance work inside Prism's one process). Runners that
// hold a key to one bundle at a time (Dataflow, Flink) ignore it.
// notes/beam-defects.md, entry 9, has the cause and a reproduction.
//
// Turn it on for every pipeline your program runs on Prism: pass
// --experiments=prism_disable_sdf_split, or call Disable after flag.Parse
// (in a test's TestMain, for example; docs/testing.md).
//
// The transforms of this module that keep per-key state cannot turn it on
// for you: an experiment is a job option that Beam reads from the global
// --experiments flag when a job is submitted, after the pipeline is built,
// for whatever runner beam.Run is then given. A transform could only
// rewrite that flag at construction, which would change every job the
// process submits later, on any runner, and race with a submission running
// in another goroutine (Beam reads the flag without a lock). They warn
// instead, loudly and once per process, at construction and when their
// step starts in a worker, when the job may run on Prism without it
// (Check).
package prismsplit

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"
)

// Experiment turns Prism's bundle splitting off.
const Experiment = "prism_disable_sdf_split"

// MayBePrism reports whether runner (as beam.Run names it) may submit to
// Prism: prism, or universal (portable), whose job server is often a
// standalone Prism.
func MayBePrism(runner string) bool {
	switch strings.ToLower(runner) {
	case "prism", "prismrunner", "universal", "portable", "portablerunner":
		return true
	}
	return false
}

// Disable adds Experiment to --experiments, keeping the experiments given,
// for every job this process submits from then on. Call it after
// flag.Parse, or the command line's --experiments replaces it. It returns a
// function that restores the previous experiments.
func Disable() (restore func()) {
	old := *jobopts.Experiments
	*jobopts.Experiments = WithExperiment(old)
	return func() { *jobopts.Experiments = old }
}

// Disabled reports whether --experiments has Experiment.
func Disabled() bool { return slices.Contains(jobopts.GetExperiments(), Experiment) }

// WithExperiment returns the comma-separated experiments exps with
// Experiment added, unless exps has it.
func WithExperiment(exps string) string {
	var list []string
	for e := range strings.SplitSeq(exps, ",") {
		if e = strings.TrimSpace(e); e != "" {
			list = append(list, e)
		}
	}
	if !slices.Contains(list, Experiment) {
		list = append(list, Experiment)
	}
	return strings.Join(list, ",")
}

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
// splitting on: --experiments lacks Experiment and --runner names a runner
// that may be Prism, or no runner (beamx.Run and ptest then run Prism).
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
	if Disabled() || (runner != "" && !MayBePrism(runner)) {
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
		step, when, Experiment, on, Experiment)
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

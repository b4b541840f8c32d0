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
// step starts in a worker, when the job may run on Prism without it.
package prismsplit

import (
	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"

	"github.com/beamdedup/beamdedup/internal/prismexp"
)

// Experiment turns Prism's bundle splitting off.
const Experiment = prismexp.Experiment

// Disable adds Experiment to --experiments, keeping the experiments given,
// for every job this process submits from then on. Call it after
// flag.Parse, or the command line's --experiments replaces it. It returns a
// function that restores the previous experiments.
func Disable() (restore func()) {
	old := *jobopts.Experiments
	*jobopts.Experiments = prismexp.WithExperiment(old)
	return func() { *jobopts.Experiments = old }
}

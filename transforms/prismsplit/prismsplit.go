// Package prismsplit is the workaround for a defect of Prism, the local
// runner of Beam Go v2.77.0 (and the default of beamx.Run and ptest):
// under load Prism splits a stateful bundle in the middle of a key and
// runs the key's remaining rows in a second bundle on the key's state as
// it was before the first bundle wrote it, so a dedup step emits the key
// twice. The experiment prism_disable_sdf_split turns Prism's splitting
// off; other runners ignore it (notes/beam-defects.md, entry 9).
//
// Turn it on for every pipeline your program runs on Prism: pass
// --experiments=prism_disable_sdf_split, or call Disable after flag.Parse
// (docs/testing.md).
//
// The stateful transforms cannot turn it on for you: Beam reads the global
// --experiments flag when a job is submitted, and rewriting it at
// construction would change every later job of the process, on any
// runner, and race with a concurrent submission. They warn instead.
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

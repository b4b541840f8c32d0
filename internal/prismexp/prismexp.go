// Package prismexp is the bookkeeping of Prism's split experiment
// (transforms/prismsplit) that the module's own code needs and a user does
// not: whether a runner may be Prism, whether the experiment is on, and
// the experiments list with it added. The transforms' warning
// (transforms/internal/prismwarn) and the job runner read it.
package prismexp

import (
	"slices"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"
)

// Experiment turns Prism's bundle splitting off (prismsplit.Experiment).
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

package jobrun

import (
	"slices"
	"strings"
	"sync/atomic"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"

	"github.com/beamdedup/beamdedup/internal/prismexp"
	"github.com/beamdedup/beamdedup/transforms/prismsplit"
)

// NoSplitsExperiment turns off Prism's dynamic splitting of running
// bundles, for every stage. Prism may split a slow bundle of a stateful
// stage inside a key and run the key's remaining rows at once on the state
// as it was, so a dedup step emits the key twice (notes/beam-defects.md 9);
// splits only rebalance work inside Prism's process. Other runners ignore
// it. Start submits every job on a runner that may be Prism with it;
// DisableSplits adds it to --experiments for what runs Beam directly.
const NoSplitsExperiment = prismsplit.Experiment

// MayBePrism reports whether runner submits to Prism: runner prism, or
// universal (portable), whose job server is often a standalone Prism.
func MayBePrism(runner string) bool { return prismexp.MayBePrism(runner) }

// splitsAllowed: AllowSplits is in effect.
var splitsAllowed atomic.Bool

// DisableSplits adds NoSplitsExperiment to --experiments, keeping the
// experiments given, for pipelines this process runs with beam.Run itself
// (Start adds it to its submissions anyway). Call it after flag.Parse, so
// that the command line does not replace it. It returns a function that
// restores the previous experiments.
func DisableSplits() (restore func()) { return prismsplit.Disable() }

// SplitsDisabled reports whether NoSplitsExperiment is in --experiments.
func SplitsDisabled() bool { return prismexp.Disabled() }

// AllowSplits lets Prism split bundles again, for a reproduction of the
// defect: it removes NoSplitsExperiment from --experiments, and Start
// stops adding it, until the returned function restores both.
func AllowSplits() (restore func()) {
	old := *jobopts.Experiments
	wasAllowed := splitsAllowed.Swap(true)
	exps := slices.DeleteFunc(jobopts.GetExperiments(), func(e string) bool { return e == NoSplitsExperiment })
	*jobopts.Experiments = strings.Join(exps, ",")
	return func() {
		*jobopts.Experiments = old
		splitsAllowed.Store(wasAllowed)
	}
}

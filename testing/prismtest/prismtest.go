// Package prismtest holds run options that tests on Prism (Beam Go v2.77.0,
// in process) need to get deterministic results from stateful steps, and
// Run, a run on Prism with a deadline.
package prismtest

import (
	"context"
	"flag"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/stretchr/testify/require"
)

// NoSplitsExperiment turns off Prism's dynamic splitting of running bundles
// for every stage (despite its name, not only splittable DoFns: Prism's
// execute.go sets each stage's sdfSplittable from it). A split of a
// stateful stage's bundle can run one key in two bundles at once, and a
// stateful DoFn then sees its first-row state twice
// (notes/beam-defects.md 9).
const NoSplitsExperiment = "prism_disable_sdf_split"

// DisableSplits adds NoSplitsExperiment to the experiments of the pipelines
// this process runs after the call (the --experiments flag). Call it after
// flag.Parse, so that it adds to the experiments given on the command line
// rather than being replaced by them: in TestMain, flag.Parse() before
// ptest.MainWithDefault (which then does not parse again). It returns a
// function that restores the previous experiments.
func DisableSplits() (restore func()) {
	old := *jobopts.Experiments
	exps := jobopts.GetExperiments()
	if !slices.Contains(exps, NoSplitsExperiment) {
		exps = append(exps, NoSplitsExperiment)
	}
	*jobopts.Experiments = strings.Join(exps, ",")
	return func() { *jobopts.Experiments = old }
}

// SplitsDisabled reports whether NoSplitsExperiment is set.
func SplitsDisabled() bool {
	return slices.Contains(jobopts.GetExperiments(), NoSplitsExperiment)
}

// AllowSplits removes NoSplitsExperiment (for a reproduction of the
// defect) and returns a function that restores the previous experiments.
func AllowSplits() (restore func()) {
	old := *jobopts.Experiments
	exps := slices.DeleteFunc(jobopts.GetExperiments(), func(e string) bool { return e == NoSplitsExperiment })
	*jobopts.Experiments = strings.Join(exps, ",")
	return func() { *jobopts.Experiments = old }
}

// Main is the TestMain of a package whose tests run pipelines on Prism:
// it parses the flags, turns Prism's bundle splitting off
// (notes/beam-defects.md 9) and runs the tests with Prism as the default
// runner (ptest.MainWithDefault).
func Main(m *testing.M) {
	flag.Parse()
	DisableSplits()
	ptest.MainWithDefault(m, "prism")
}

// Run runs p on Prism (in process) with a deadline, so that a stalled run
// fails the test instead of hanging it, and fails tb on any run error.
func Run(tb testing.TB, p *beam.Pipeline, deadline time.Duration) beam.PipelineResult {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	pr, err := beam.Run(ctx, "prism", p)
	require.NoError(tb, err, "run on Prism (deadline %v)", deadline)
	return pr
}

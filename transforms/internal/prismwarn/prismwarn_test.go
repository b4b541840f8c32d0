package prismwarn_test

import (
	"context"
	"flag"
	"strings"
	"sync"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"

	// A program that runs on Prism links the universal runner, and with it
	// the SDK harness's flags (--worker).
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/universal"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/transforms/internal/prismwarn"
)

// The common --runner flag of beamx and ptest (pkg/beam/runners), which
// this test binary does not link.
var runnerFlag = flag.String("runner", "", "pipeline runner")

// logged captures Beam's log.
type logged struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logged) Log(_ context.Context, sev log.Severity, _ int, msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if sev == log.SevWarn {
		l.msgs = append(l.msgs, msg)
	}
}

// withFlags sets --experiments, --runner and --worker for the test.
func withFlags(t *testing.T, experiments, runner string, worker bool) {
	t.Helper()
	oldExp, oldRunner := *jobopts.Experiments, *runnerFlag
	w := flag.Lookup("worker")
	require.NotNil(t, w, "Beam defines --worker (beam.Init reads it in a worker process)")
	oldWorker := w.Value.String()
	t.Cleanup(func() {
		*jobopts.Experiments, *runnerFlag = oldExp, oldRunner
		require.NoError(t, w.Value.Set(oldWorker))
	})
	*jobopts.Experiments, *runnerFlag = experiments, runner
	require.NoError(t, w.Value.Set(map[bool]string{true: "true", false: "false"}[worker]))
}

func TestCheck_AtRiskWhereTheJobMayRunOnPrismWithSplittingOn(t *testing.T) {
	for _, tc := range []struct {
		name        string
		experiments string
		runner      string
		worker      bool // a worker process of its own
		phase       prismwarn.Phase
		risk        bool
	}{
		{"no runner (beamx.Run and ptest: Prism), no experiment", "", "", false, prismwarn.Construction, true},
		{"prism, no experiment", "a,b", "prism", false, prismwarn.Construction, true},
		{"universal, no experiment", "", "universal", false, prismwarn.Construction, true},
		{"prism, with the experiment", "a,prism_disable_sdf_split", "prism", false, prismwarn.Construction, false},
		{"flink", "", "flink", false, prismwarn.Construction, false},
		{"dataflow", "", "dataflow", false, prismwarn.Construction, false},
		{"at run, a loopback worker", "", "prism", false, prismwarn.Run, true},
		{"at run, with the experiment", "prism_disable_sdf_split", "", false, prismwarn.Run, false},
		{"at run, a worker process of its own: the job's experiments are not visible", "", "", true, prismwarn.Run, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			withFlags(t, tc.experiments, tc.runner, tc.worker)
			assert.Equal(t, tc.risk, prismwarn.Check(context.Background(), tc.phase, "dedup.KeepFirst"))
		})
	}
}

func TestCheck_WarnsOncePerProcessAndPhaseWithTheFix(t *testing.T) {
	var l logged
	log.SetLogger(&l)
	t.Cleanup(func() { log.SetLogger(&log.Structural{}) })
	prismwarn.ResetWarnings()
	t.Cleanup(prismwarn.ResetWarnings)
	withFlags(t, "", "", false)

	for range 3 {
		prismwarn.Check(context.Background(), prismwarn.Construction, "dedup.KeepFirst (UID a)")
		prismwarn.Check(context.Background(), prismwarn.Run, "a dedup step")
	}
	require.Len(t, l.msgs, 2, "one warning at construction, one at run")
	assert.True(t, strings.HasPrefix(l.msgs[0], "WARNING: beamdedup: dedup.KeepFirst (UID a) keeps per-key state and is built into a pipeline"), l.msgs[0])
	assert.Contains(t, l.msgs[1], "a dedup step keeps per-key state and is running")
	for _, m := range l.msgs {
		assert.Contains(t, m, "--experiments=prism_disable_sdf_split", "the fix")
		assert.Contains(t, m, "emitted twice", "what goes wrong")
	}

	l.msgs = nil
	prismwarn.ResetWarnings()
	withFlags(t, "prism_disable_sdf_split", "", false)
	prismwarn.Check(context.Background(), prismwarn.Construction, "dedup.KeepFirst")
	assert.Empty(t, l.msgs, "no warning with the experiment")
}

// Check tells a worker process from the program that submitted the job by
// Beam's --worker, which the SDK harness defines (linked with the
// universal runner, so with Prism) and a runner's boot loader sets. If
// Beam renamed it, Check would warn in every worker process.
func TestBeamDefinesTheWorkerFlag(t *testing.T) {
	f := flag.Lookup("worker")
	require.NotNil(t, f, "Beam no longer defines --worker: Check cannot tell a worker process from the launcher")
	assert.Equal(t, "false", f.DefValue)
}

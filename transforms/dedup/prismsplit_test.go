package dedup_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/internal/jobrun"
	"github.com/beamdedup/beamdedup/testing/prismtest"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// splitWarningChild names the case TestPrismSplitWarningChild runs in a
// child process: "without" or "with" the experiment.
const splitWarningChild = "BEAMDEDUP_SPLIT_WARNING_CHILD"

// A user's test of a stream on Prism, without the experiment: KeepFirst
// warns once when it is built and once when its step runs, naming the
// fix, however many stateful steps the pipeline has; with the experiment
// it says nothing. Each case is a test binary of its own, as a user's is
// (the warnings are once per process).
func TestPrismSplitWarning_OnceAtConstructionAndOnceAtRunWithoutTheExperiment(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		atConstruction, atRun int
	}{
		{"without", 1, 1},
		{"with", 0, 0},
	} {
		t.Run(tc.name+" the experiment", func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestPrismSplitWarningChild$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), splitWarningChild+"="+tc.name)
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
			require.Contains(t, string(out), "--- PASS: TestPrismSplitWarningChild", "the child ran its pipeline")
			assert.Equal(t, tc.atConstruction, strings.Count(string(out), "keeps per-key state and is built into a pipeline"), "%s", out)
			assert.Equal(t, tc.atRun, strings.Count(string(out), "keeps per-key state and is running"), "%s", out)
			if tc.atConstruction > 0 {
				assert.Contains(t, string(out), "WARNING: beamdedup: dedup.KeepFirst (UID first-dedup)")
				assert.Contains(t, string(out), "--experiments=prism_disable_sdf_split")
			}
		})
	}
}

// TestPrismSplitWarningChild is the child process of the test above: two
// KeepFirst steps on a TestStream, run on Prism.
func TestPrismSplitWarningChild(t *testing.T) {
	mode := os.Getenv(splitWarningChild)
	if mode == "" {
		t.Skip("run by TestPrismSplitWarning_OnceAtConstructionAndOnceAtRunWithoutTheExperiment")
	}
	if mode == "without" {
		t.Cleanup(jobrun.AllowSplits()) // as a user's TestMain that does not disable splits
	}
	p, s := beam.NewPipelineWithRoot()
	in := streamOf(t, s, userEvent{"Vas", "login", 1}, userEvent{"Vas", "login", 2}, userEvent{"Bob", "x", 3})
	first := dedup.KeepFirst(s, in, rowspec.PartitionBy("user_name"), dedup.UID("first-dedup")).Rows
	dedup.KeepFirst(s, first, dedup.PartitionByAll(), dedup.UID("second-dedup"))
	c := dedup.ReadCounters(prismtest.Run(t, p, 2*time.Minute))
	assert.Equal(t, int64(2+2), c.Emitted)
}

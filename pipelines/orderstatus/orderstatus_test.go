package orderstatus_test

import (
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/pipelines/jsonl"
	"github.com/beamdedup/beamdedup/pipelines/orderstatus"
	"github.com/beamdedup/beamdedup/testing/pipelinetest"
	"github.com/beamdedup/beamdedup/testing/prismtest"
	"github.com/beamdedup/beamdedup/transforms/changelog"
)

func TestMain(m *testing.M) { prismtest.Main(m) } // splitting off: notes/beam-defects.md 9

// The count per status counts each order once, in its last status; the
// naive count counts every event, resends included. Both expansions of the
// count, with dedup.KeepLast, give the same counts; the stateful one's
// versions count every change applied (testdata/orderstatus/stateful).
func TestBuildMatchesExpectedFiles(t *testing.T) {
	for _, stateful := range []bool{false, true} {
		t.Run(map[bool]string{false: "batch", true: "stateful"}[stateful], func(t *testing.T) {
			naive := t.TempDir() + "/naive.jsonl"
			dir := map[bool]string{false: "orderstatus", true: "orderstatus/stateful"}[stateful]
			pr := pipelinetest.RunTestdata(t, dir, func(s beam.Scope, input, output string) error {
				_, err := orderstatus.Build(s, orderstatus.Config{Input: input, Output: output, Naive: naive,
					Stateful: stateful})
				return err
			})
			pipelinetest.CompareLines(t, pipelinetest.Testdata("orderstatus/expected.naive.jsonl"), naive)
			assert.Equal(t, int64(3), jsonl.ReadMalformed(pr), "malformed lines")
			c := changelog.ReadCounters(pr)
			if !stateful { // the stateful changelog also carries each order's -U/+U pairs
				assert.Equal(t, int64(12+30), c.RowsIn, "12 final rows and 30 events counted")
			}
			assert.Equal(t, c.RowsIn, c.Added+c.Subtracted+c.DeadLettered)
		})
	}
}

func TestBuildReportsConfigurationErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  orderstatus.Config
		want string
	}{
		{"no input", orderstatus.Config{}, "Input is required"},
		{"bad output scheme", orderstatus.Config{Input: pipelinetest.Testdata("orderstatus/input.jsonl"), Output: "nope://x"}, "output"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, s := beam.NewPipelineWithRoot()
			_, err := orderstatus.Build(s, tc.cfg)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

package orderstatus_test

import (
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/pipelines/internal/pipelinetest"
	"github.com/beamdedup/beamdedup/pipelines/jsonl"
	"github.com/beamdedup/beamdedup/pipelines/orderstatus"
	"github.com/beamdedup/beamdedup/transforms/changelog"
	"github.com/beamdedup/beamdedup/transforms/dedup"
)

func TestMain(m *testing.M) { ptest.MainWithDefault(m, "prism") }

func init() {
	register.Function1x2(byOrder)
	register.Function2x1(later)
	register.Function2x1(asFinalInsert)
}

// finalRows stands in for dedup.KeepLast on bounded input, which emits
// each order's last event (largest ts) once, as +I. It is the test's
// keep-last until dedup.KeepLast is in this module.
func finalRows(s beam.Scope, events beam.PCollection, _ []dedup.Option) (beam.PCollection, beam.PCollection, error) {
	s = s.Scope("FinalRows")
	last := beam.CombinePerKey(s, later, beam.ParDo(s, byOrder, events))
	return beam.ParDo(s, asFinalInsert, last), beam.CreateList(s, []jsonl.DeadLetter{}), nil
}

func byOrder(e orderstatus.Event) (string, orderstatus.Event) { return e.OrderID, e }

func later(a, b orderstatus.Event) orderstatus.Event {
	if b.TS.After(a.TS) || (b.TS.Equal(a.TS) && b.Status > a.Status) {
		return b
	}
	return a
}

func asFinalInsert(_ string, e orderstatus.Event) orderstatus.Event {
	e.Op = changelog.Insert.String()
	return e
}

// The count per status counts each order once, in its last status; the
// naive count counts every event, resends included. Both expansions of the
// count give the same files.
func TestBuildMatchesExpectedFiles(t *testing.T) {
	for _, stateful := range []bool{false, true} {
		t.Run(map[bool]string{false: "batch", true: "stateful"}[stateful], func(t *testing.T) {
			naive := t.TempDir() + "/naive.jsonl"
			pr := pipelinetest.RunTestdata(t, "orderstatus", func(s beam.Scope, input, output string) error {
				_, err := orderstatus.Build(s, orderstatus.Config{Input: input, Output: output, Naive: naive,
					Stateful: stateful, KeepLast: finalRows})
				return err
			})
			pipelinetest.CompareLines(t, pipelinetest.Testdata("orderstatus/expected.naive.jsonl"), naive)
			assert.Equal(t, int64(3), jsonl.ReadMalformed(pr), "malformed lines")
			c := changelog.ReadCounters(pr)
			assert.Equal(t, int64(12+30), c.RowsIn, "12 final rows and 30 events counted")
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
		{"no input", orderstatus.Config{KeepLast: finalRows}, "Input is required"},
		{"no keep-last step", orderstatus.Config{Input: "x.jsonl"}, "no keep-last step"},
		{"bad output scheme", orderstatus.Config{Input: "x.jsonl", Output: "nope://x", KeepLast: finalRows}, "output"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if orderstatus.DefaultKeepLast != nil && tc.cfg.KeepLast == nil {
				t.Skip("dedup.KeepLast is wired in")
			}
			_, s := beam.NewPipelineWithRoot()
			_, err := orderstatus.Build(s, tc.cfg)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

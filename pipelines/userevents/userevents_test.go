package userevents_test

import (
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/pipelines/jsonl"
	"github.com/beamdedup/beamdedup/pipelines/userevents"
	"github.com/beamdedup/beamdedup/testing/pipelinetest"
	"github.com/beamdedup/beamdedup/testing/prismtest"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

func TestMain(m *testing.M) { prismtest.Main(m) } // splitting off: notes/beam-defects.md 9

// The file holds the spec's 4.1.2.2.1 rows for u1 (view at 10:01 wins over
// the earlier-read click at 10:02), an exact duplicate (u2), an earlier
// row read after a later one (u3, and u2's 10:04:59 click read last), and
// two malformed rows.
func TestBuildKeepsEarliestRowPerUser(t *testing.T) {
	for _, tc := range pipelinetest.Expansions {
		t.Run(tc.Name, func(t *testing.T) {
			pr := pipelinetest.RunTestdata(t, "userevents", func(s beam.Scope, input, output string) error {
				_, err := userevents.Build(s, userevents.Config{Input: input, Output: output, Dedup: tc.Options})
				return err
			})
			c := dedup.ReadCounters(pr)
			assert.Equal(t, int64(8), c.RowsIn)
			assert.Equal(t, int64(3), c.Emitted)
			assert.Zero(t, c.Pending(), "a bounded run finalizes every candidate")
			assert.Equal(t, int64(2), jsonl.ReadMalformed(pr))
		})
	}
}

func TestBuildReportsConfigurationErrors(t *testing.T) {
	in := pipelinetest.Testdata("userevents/input.jsonl")
	for _, tc := range []struct {
		name string
		cfg  userevents.Config
		want string
	}{
		{"no input", userevents.Config{}, "Input is required"},
		{"missing input", userevents.Config{Input: "does-not-exist.jsonl"}, `input: no file matches "does-not-exist.jsonl"`},
		{"on_time not a time", userevents.Config{Input: in, Dedup: []dedup.Option{rowspec.OnTime("event")}}, "event"},
		{"on_time with changelog", userevents.Config{Input: in, Dedup: []dedup.Option{rowspec.KindColumn("event")}}, "KindColumn"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, s := beam.NewPipelineWithRoot()
			_, err := userevents.Build(s, tc.cfg)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

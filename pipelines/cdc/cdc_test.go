package cdc_test

import (
	"encoding/json"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/pipelines/cdc"
	"github.com/beamdedup/beamdedup/pipelines/jsonl"
	"github.com/beamdedup/beamdedup/testing/pipelinetest"
	"github.com/beamdedup/beamdedup/testing/prismtest"
	"github.com/beamdedup/beamdedup/transforms/dedup"
)

func TestMain(m *testing.M) { prismtest.Main(m) } // splitting off: notes/beam-defects.md 9

func TestChangeReadsFlatAndDebeziumChanges(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		want       cdc.Change
		wantErr    string
	}{
		{"flat +I", `{"op":"+I","user_name":"Vas","event":"login"}`, cdc.Change{"+I", "Vas", "login", 0}, ""},
		{"flat -U", `{"op":"-U","user_name":"Vas","event":"login"}`, cdc.Change{"-U", "Vas", "login", 0}, ""},
		{"debezium create", `{"op":"c","before":null,"after":{"user_name":"Bob","event":"login"}}`, cdc.Change{"+I", "Bob", "login", 0}, ""},
		{"debezium snapshot read", `{"op":"r","after":{"user_name":"Ann","event":"x"}}`, cdc.Change{"+I", "Ann", "x", 0}, ""},
		{"debezium update takes after", `{"op":"u","before":{"user_name":"Bob","event":"a"},"after":{"user_name":"Bob","event":"b"}}`, cdc.Change{"+U", "Bob", "b", 0}, ""},
		{"debezium delete takes before", `{"op":"d","before":{"user_name":"Bob","event":"a"},"after":null}`, cdc.Change{"-D", "Bob", "a", 0}, ""},
		{"debezium payload wrapper", `{"schema":{},"payload":{"op":"c","after":{"user_name":"Eve","event":"e"}}}`, cdc.Change{"+I", "Eve", "e", 0}, ""},
		{"flat ts_ms", `{"op":"+I","user_name":"Vas","ts_ms":7}`, cdc.Change{Op: "+I", UserName: "Vas", TsMs: 7}, ""},
		{"debezium envelope ts_ms", `{"op":"c","after":{"user_name":"Bob"},"ts_ms":9}`, cdc.Change{Op: "+I", UserName: "Bob", TsMs: 9}, ""},
		{"unknown op kept for KeepFirst to reject", `{"op":"x","user_name":"Max"}`, cdc.Change{Op: "x", UserName: "Max"}, ""},
		{"debezium create without after", `{"op":"c","after":null}`, cdc.Change{}, `without a row in "after"`},
		{"not an object", `[1]`, cdc.Change{}, "cannot unmarshal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got cdc.Change
			err := json.Unmarshal([]byte(tc.line), &got)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// The file holds the spec's 4.1.3.7 changelog for Vas, the same story in
// Debezium form for Bob, a snapshot read (Ann), an upsert-only user (Eve),
// an unknown op (dead-lettered by KeepFirst) and three malformed lines.
func TestBuildTurnsChangelogIntoInsertOnlyFirstVersions(t *testing.T) {
	for _, tc := range pipelinetest.Expansions {
		t.Run(tc.Name, func(t *testing.T) {
			pr := pipelinetest.RunTestdata(t, "cdc", func(s beam.Scope, input, output string) error {
				_, err := cdc.Build(s, cdc.Config{Input: input, Output: output, Dedup: tc.Options})
				return err
			})
			c := dedup.ReadCounters(pr)
			// Later +I/+U count as duplicates. Whether a -U/-D counts as swallowed
			// or as an ignored retraction depends on the expansion (the batch one
			// cannot tell "before the first +I" apart), so only their sum is fixed.
			assert.Equal(t, dedup.Counters{RowsIn: 13, Emitted: 4, DuplicatesDropped: 3, ChangelogSwallowed: 5, DeadLettered: 1},
				dedup.Counters{RowsIn: c.RowsIn, Emitted: c.Emitted, DuplicatesDropped: c.DuplicatesDropped,
					ChangelogSwallowed: c.ChangelogSwallowed + c.RetractionsIgnored, DeadLettered: c.DeadLettered})
			assert.Equal(t, int64(3), jsonl.ReadMalformed(pr))
		})
	}
}

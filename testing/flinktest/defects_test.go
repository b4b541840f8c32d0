package flinktest_test

import (
	"context"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/pipelines/jobrun"
	"github.com/beamdedup/beamdedup/testing/flinktest"
)

// withNilSlice is a schema row whose slice may be nil.
type withNilSlice struct {
	IDs []string
	N   int64
}

func init() {
	registerTypes(withNilSlice{})
	register.Function1x2(keyNilSlice)
	register.Function2x1(groupKey)
	register.Iter1[withNilSlice]()
}

func groupKey(k string, _ func(*withNilSlice) bool) string { return k }

func keyNilSlice(r withNilSlice) (string, withNilSlice) { return "k", r }

// The Go SDK (2.77.0) encodes a nil slice field of a schema row as a null
// field, of a field its schema declares non-nullable; Beam Java's RowCoder
// (2.62.0 here, 2.70.0 alike) cannot decode it back, and Flink decodes
// rows between stages (here at the GroupByKey): the job fails. An empty
// slice is fine. This test fails when a Beam release changes either side:
// then pubsubio's restriction need not avoid nil (docs/runners.md).
func TestBeamDefect_ANilSliceInASchemaRowFailsAFlinkJobAnEmptyOneDoesNot(t *testing.T) {
	for _, tc := range []struct {
		name  string
		row   withNilSlice
		fails bool
	}{
		{"nil", withNilSlice{N: 1}, true},
		{"empty", withNilSlice{IDs: []string{}, N: 1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, s := beam.NewPipelineWithRoot()
			grouped := beam.GroupByKey(s, beam.ParDo(s, keyNilSlice, beam.Create(s, tc.row)))
			out := collect(s, beam.ParDo(s, groupKey, grouped), false)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			_, err := jobrun.Run(ctx, p, jobrun.Options{Runner: "flink", Endpoint: flinktest.Shared(t).Endpoint,
				EnvironmentType: "LOOPBACK", StallLimit: time.Minute})
			if tc.fails {
				require.Error(t, err)
				assert.Contains(t, err.Error(), "EOFException")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, []string{`"k"`}, rowsOf(out))
		})
	}
}

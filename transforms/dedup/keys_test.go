package dedup_test

import (
	"math"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/stretchr/testify/assert"

	"github.com/beamdedup/beamdedup/testing/deduptest"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

type nullableRow struct {
	Region *string  `beam:"region"`
	Zone   *int64   `beam:"zone"`
	Score  *float64 `beam:"score"`
	Seq    int64    `beam:"seq"`
}

func init() {
	beam.RegisterType(reflectType[nullableRow]())
	register.Function1x1(seqOf)
}

func seqOf(r nullableRow) int64 { return r.Seq }

func ptr[T any](v T) *T { return &v }

// NULLs equal each other and differ from "" and 0 (GROUP BY semantics);
// NULL-key rows are neither dropped nor rejected; -0 equals 0 and NaNs are
// equal.
func TestKeys_MultiColumnWithNullsFollowGroupBySemantics(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	in := streamOf(t, s,
		nullableRow{nil, nil, nil, 1},
		nullableRow{nil, nil, nil, 2}, // NULL, NULL equals NULL, NULL
		nullableRow{ptr(""), ptr(int64(0)), nil, 3},
		nullableRow{ptr(""), ptr(int64(0)), nil, 4}, // "" and 0 equal themselves
		nullableRow{ptr("eu"), nil, ptr(0.0), 5},
		nullableRow{ptr("eu"), nil, ptr(math.Copysign(0, -1)), 6}, // -0 == 0
		nullableRow{ptr("eu"), nil, ptr(math.NaN()), 7},
		nullableRow{ptr("eu"), nil, ptr(-math.NaN()), 8}, // NaNs are equal
		nullableRow{ptr("eu"), ptr(int64(1)), nil, 9},
	)
	out := dedup.KeepFirst(s, in, rowspec.PartitionBy("region", "zone", "score")).Rows
	seqs := beam.ParDo(s, seqOf, out)
	passert.Equals(s, seqs, int64(1), int64(3), int64(5), int64(7), int64(9))
	c := run(t, p)
	assert.Equal(t, dedup.Counters{RowsIn: 9, Emitted: 5, DuplicatesDropped: 4}, deduptest.RowCounts(c))
}

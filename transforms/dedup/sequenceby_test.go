package dedup_test

import (
	"fmt"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/teststream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/transforms/deadletter"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// seqRow is ordered by its Version column; Tag tells which row was kept.
type seqRow struct {
	ID      string   `beam:"id"`
	Version *float64 `beam:"version"`
	Tag     string   `beam:"tag"`
}

func init() {
	beam.RegisterType(reflectType[seqRow]())
	register.Function1x1(formatSeqRow)
}

func formatSeqRow(r seqRow) string { return r.ID + "/" + r.Tag }

func ver(v float64) *float64 { return &v }

// On bounded input KeepFirst with SequenceBy keeps the row with the
// smallest value per key, whatever the arrival order; a NULL value is a
// dead letter with its reason.
func TestSequenceBy_KeepFirstOnBoundedInputKeepsTheSmallestValue(t *testing.T) {
	for _, mb := range []bool{true, false} {
		t.Run(fmt.Sprintf("MiniBatch=%v", mb), func(t *testing.T) {
			p, s := beam.NewPipelineWithRoot()
			in := beam.Create(s,
				seqRow{"a", ver(3), "v3"}, seqRow{"a", ver(-1), "v-1"}, seqRow{"a", ver(2), "v2"},
				seqRow{"b", ver(10), "v10"}, seqRow{"b", nil, "null"}, seqRow{"b", ver(9.5), "v9.5"})
			r1 := dedup.KeepFirst(s, in, rowspec.PartitionBy("id"), rowspec.SequenceBy("version"), dedup.MiniBatch(mb))
			out, dead := r1.Rows, r1.DeadLetters
			passert.Equals(s, beam.ParDo(s, formatSeqRow, out), "a/v-1", "b/v9.5")
			passert.Equals(s, dead, deadletter.DeadLetter{Row: `{"id":"b","version":null,"tag":"null"}`, Reason: `SequenceBy column "version" is NULL`, Transform: "KeepFirst"})
			c := run(t, p)
			assert.Equal(t, int64(6), c.RowsIn)
			assert.Equal(t, int64(1), c.DeadLettered)
			assert.Zero(t, c.Pending(), "%+v", c)
		})
	}
}

func TestSequenceBy_KeepFirstOnAStreamIsAConstructionErrorPointingToOnTime(t *testing.T) {
	_, s := beam.NewPipelineWithRoot()
	ts := teststream.NewConfig()
	require.NoError(t, ts.AddElements(0, seqRow{"a", ver(1), "x"}))
	_, err := dedup.TryKeepFirst(s, teststream.Create(s, ts), rowspec.PartitionBy("id"), rowspec.SequenceBy("version"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "OnTime")
}

func TestSequenceBy_UnknownColumnOrUnsupportedTypeIsAConstructionError(t *testing.T) {
	_, s := beam.NewPipelineWithRoot()
	in := beam.Create(s, badKeyRow{Name: "x"})
	_, err := dedup.TryKeepFirst(s, in, rowspec.SequenceBy("nope"))
	assert.ErrorContains(t, err, `"nope"`)
	_, err = dedup.TryKeepFirst(s, in, rowspec.SequenceBy("tags"))
	assert.ErrorContains(t, err, "must be a signed or unsigned integer, a float, a time.Time or a string")
}

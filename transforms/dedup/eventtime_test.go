package dedup_test

import (
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/teststream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// Spec 4.1.3.5: watermark = max(rowtime) - 5 min; the earlier 10:01 view
// replaces the 10:02 click and is emitted when the watermark reaches 10:01,
// timestamped 10:01; the 10:00 signup after finalization is late.
func TestEventTime_Spec_4_1_3_5_EarliestRowEmittedAtWatermarkLateRowDropped(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	ts := teststream.NewConfig()
	require.NoError(t, ts.AddElements(ms(at(10, 2)), timedEvent{"u1", "click", at(10, 2)}))
	require.NoError(t, ts.AdvanceWatermark(ms(at(9, 57))))
	require.NoError(t, ts.AddElements(ms(at(10, 1)), timedEvent{"u1", "view", at(10, 1)}))
	require.NoError(t, ts.AdvanceWatermark(ms(at(9, 57))+1))
	require.NoError(t, ts.AddElements(ms(at(10, 6)), timedEvent{"u1", "scroll", at(10, 6)}))
	require.NoError(t, ts.AdvanceWatermark(ms(at(10, 1))))
	require.NoError(t, ts.AddElements(ms(at(10, 0)), timedEvent{"u1", "signup", at(10, 0)}))
	require.NoError(t, ts.AdvanceWatermark(ms(at(10, 2))))
	require.NoError(t, ts.AdvanceWatermarkToInfinity())
	in := teststream.Create(s, ts)

	out := dedup.KeepFirst(s, in, rowspec.PartitionBy("user_id"), rowspec.OnTime("rowtime"), dedup.StateTTL(5*60e9)).Rows
	passert.Equals(s, beam.ParDo(s, formatTimed, out), "u1/view@10:01")

	c := run(t, p)
	assert.Equal(t, int64(4), c.RowsIn)
	assert.Equal(t, int64(1), c.Emitted)
	assert.Equal(t, int64(1), c.CandidatesReplaced, "click replaced by the earlier view")
	// Prism hands the 10:06 scroll to the DoFn after the 10:01 timer (it
	// orders a key's elements and timers by event time), so it may count as
	// late rather than as a duplicate of the candidate; both drop it.
	assert.Equal(t, int64(2), c.DuplicatesDropped+c.LateDropped, "scroll and signup dropped")
	assert.Zero(t, c.Pending())
}

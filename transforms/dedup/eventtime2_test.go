package dedup_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/teststream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/testing/deduptest"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

type epochEvent struct {
	UserID string `beam:"user_id"`
	Event  string `beam:"event"`
	TsMs   int64  `beam:"ts_ms"`
}

func init() {
	beam.RegisterType(reflectType[epochEvent]())
	register.Function1x1(epochName)
	register.Function2x1(formatTimedShortID)
	register.Function1x1(padEvent)
	register.Function2x0(stampRowtime)
	register.Emitter2[beam.EventTime, timedEvent]()
}

func epochName(e epochEvent) string { return e.UserID + "/" + e.Event }

// stampRowtime sets a row's timestamp from its rowtime column.
func stampRowtime(e timedEvent, emit func(beam.EventTime, timedEvent)) {
	emit(beam.EventTime(e.Rowtime.UnixMilli()), e)
}

// A candidate at 10:05 must not be emitted while the watermark is behind
// it, so a later-arriving 10:03 row still replaces it; a tie at 10:03 keeps
// the first arrival; the output timestamp is
// the kept row's event time.
func TestEventTime_LaterArrivingEarlierRowReplacesCandidateBeforeWatermark(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	ts := teststream.NewConfig()
	require.NoError(t, ts.AdvanceWatermark(ms(at(10, 0))))
	require.NoError(t, ts.AddElements(ms(at(10, 5)), timedEvent{"u1", "a", at(10, 5)}))
	require.NoError(t, ts.AdvanceWatermark(ms(at(10, 1))))
	require.NoError(t, ts.AddElements(ms(at(10, 3)), timedEvent{"u1", "b", at(10, 3)}))
	require.NoError(t, ts.AdvanceWatermark(ms(at(10, 2))))
	require.NoError(t, ts.AddElements(ms(at(10, 3)), timedEvent{"u1", "c-tie", at(10, 3)}))
	require.NoError(t, ts.AdvanceWatermark(ms(at(10, 2))+1))
	require.NoError(t, ts.AdvanceWatermarkToInfinity())
	in := teststream.Create(s, ts)
	out := dedup.KeepFirst(s, in, rowspec.PartitionBy("user_id"), rowspec.OnTime("rowtime")).Rows
	passert.Equals(s, beam.ParDo(s, formatTimed, out), "u1/b@10:03")
	c := run(t, p)
	assert.Equal(t, dedup.Counters{RowsIn: 3, Emitted: 1, CandidatesReplaced: 1, DuplicatesDropped: 1}, deduptest.RowCounts(c), "a replaced; the tie c stays dropped")
}

// Once emitted, every later row of the key is dropped as late, even one
// with an earlier event time; other keys are unaffected. The OnTime column
// may be int64 epoch milliseconds.
func TestEventTime_RowsAfterFinalizationAreDroppedAsLate(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	ts := teststream.NewConfig()
	require.NoError(t, ts.AddElements(ms(at(10, 1)), epochEvent{"u1", "first", ms(at(10, 1))}))
	require.NoError(t, ts.AdvanceWatermark(ms(at(10, 2))))
	require.NoError(t, ts.AddElements(ms(at(10, 3)), epochEvent{"u1", "later", ms(at(10, 3))}, epochEvent{"u2", "other", ms(at(10, 3))}))
	require.NoError(t, ts.AdvanceWatermark(ms(at(10, 4))))
	require.NoError(t, ts.AdvanceWatermarkToInfinity())
	in := teststream.Create(s, ts)
	out := dedup.KeepFirst(s, in, rowspec.PartitionBy("user_id"), rowspec.OnTime("ts_ms")).Rows
	passert.Equals(s, beam.ParDo(s, epochName, out), "u1/first", "u2/other")
	c := run(t, p)
	assert.Equal(t, dedup.Counters{RowsIn: 3, Emitted: 2, LateDropped: 1}, deduptest.RowCounts(c))
}

// Flink drops the first row of an unseen key whose time is already behind
// the watermark; a Beam DoFn cannot read the watermark, so we keep it: it
// becomes the candidate and is emitted at the next watermark advance.
func TestEventTime_FirstRowBehindWatermarkIsEmittedNotLost(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	ts := teststream.NewConfig()
	require.NoError(t, ts.AdvanceWatermark(ms(at(11, 0))))
	require.NoError(t, ts.AddElements(ms(at(11, 0)), timedEvent{"u9", "old", at(10, 0)}))
	require.NoError(t, ts.AdvanceWatermark(ms(at(11, 1))))
	require.NoError(t, ts.AdvanceWatermarkToInfinity())
	in := teststream.Create(s, ts)
	out := dedup.KeepFirst(s, in, rowspec.PartitionBy("user_id"), rowspec.OnTime("rowtime")).Rows
	passert.Equals(s, beam.ParDo(s, formatTimed, out), "u9/old@10:00")
	run(t, p)
}

// EventTimeTTL: a row more than d after the key's largest event time starts
// a new period; rows within d are duplicates. Works with no processing-time
// timer at all.
func TestEventTimeTTL_RowBeyondRetentionStartsNewPeriod(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	in := streamOf(t, s,
		timedEvent{"u1", "a", at(10, 0)},
		timedEvent{"u1", "b", at(10, 4)},  // within 5 min of 10:00: duplicate, refreshes to 10:04
		timedEvent{"u1", "c", at(10, 9)},  // within 5 min of 10:04: duplicate
		timedEvent{"u1", "d", at(10, 20)}, // more than 5 min after 10:09: new period
	)
	// Watermarkless mode: the event time is the row's timestamp, set here
	// from the rowtime column by a ParDo.
	stamped := beam.ParDo(s, stampRowtime, in)
	out := dedup.KeepFirst(s, stamped, rowspec.PartitionBy("user_id"), dedup.EventTimeTTL(5*time.Minute)).Rows
	passert.Equals(s, beam.ParDo(s, formatTimed, out), "u1/a@10:00", "u1/d@10:20")
	c := run(t, p)
	assert.Equal(t, int64(2), c.Emitted)
	assert.Equal(t, int64(2), c.DuplicatesDropped)
}

// An event-time candidate's timer carries the candidate in its tag, so the
// finalization reads no state; a candidate too large for a tag waits in
// state and its firing reads it. Replacements between the two kinds still
// give exactly the earliest row, and a replaced candidate's timer emits
// nothing.
func TestEventTime_CandidatesInTimerTagsOrInStateEmitOnlyTheEarliestRow(t *testing.T) {
	small, big := "", "|"+strings.Repeat("x", 2000)
	for _, tc := range []struct {
		name      string
		payloads  [3]string // arriving at 10:05, 10:03, 10:01: each replaces the last
		wantReads int64
	}{
		{"small, small, small", [3]string{small, small, small}, 3},
		{"small, small, big", [3]string{small, small, big}, 4},
		{"big, small, big", [3]string{big, small, big}, 4},
		// the replaced big candidate's untagged timer reads to find it stale
		{"big, big, small", [3]string{big, big, small}, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, s := beam.NewPipelineWithRoot()
			ts := teststream.NewConfig()
			for i, min := range []int{5, 3, 1} {
				// One row per watermark step, all before 10:00: Prism hands
				// a key's rows of one step over in event-time order.
				require.NoError(t, ts.AdvanceWatermark(ms(at(9, 50+i))))
				e := timedEvent{"u1", fmt.Sprint("e", min, tc.payloads[i]), at(10, min)}
				require.NoError(t, ts.AddElements(ms(e.Rowtime), e))
			}
			require.NoError(t, ts.AdvanceWatermarkToInfinity())
			out := dedup.KeepFirst(s, teststream.Create(s, ts), rowspec.PartitionBy("user_id"), rowspec.OnTime("rowtime")).Rows
			passert.Equals(s, beam.ParDo(s, formatTimedShortID, out), "u1/e1@10:01")
			c := run(t, p)
			assert.Equal(t, dedup.Counters{RowsIn: 3, Emitted: 1, CandidatesReplaced: 2}, deduptest.RowCounts(c))
			assert.Equal(t, tc.wantReads, c.StateReads+c.StateCacheHits, "one read (or a bundle's cached state) per row, plus one per firing of an untagged timer")
		})
	}
}

// Differential test of the two finalization paths: the same random stream
// (late rows, replacements, ties, watermark steps) through KeepFirst with
// small rows (candidates carried in timer tags, no read at the firing) and
// with the same rows padded past the tag limit (candidates read from state)
// gives the same rows, timestamps and counts; only state reads differ.
func TestEventTime_TaggedAndStateFinalizationAgreeOnARandomStream(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 8))
	ts := teststream.NewConfig()
	base := ms(at(10, 0))
	wm := base - 60_000
	rows := 0
	for step := range 40 {
		require.NoError(t, ts.AdvanceWatermark(wm))
		var batch []any
		for range 1 + rng.IntN(8) {
			// Event times around the watermark: some behind it (late if the
			// key is emitted), most ahead of it (candidates, replacements).
			et := wm + rng.Int64N(120_000) - 20_000
			batch = append(batch, timedEvent{fmt.Sprint("u", rng.IntN(12)), fmt.Sprint("e", step, "-", len(batch)), time.UnixMilli(et)})
		}
		rows += len(batch)
		require.NoError(t, ts.AddElements(wm, batch...))
		wm += rng.Int64N(15_000)
	}
	require.NoError(t, ts.AdvanceWatermarkToInfinity())

	p, s := beam.NewPipelineWithRoot()
	small := teststream.Create(s, ts)
	big := beam.ParDo(s, padEvent, small)
	opts := []dedup.Option{rowspec.PartitionBy("user_id"), rowspec.OnTime("rowtime")}
	tagged := dedup.KeepFirst(s.Scope("tagged"), small, append(opts, dedup.UID("tagged"))...).Rows
	inState := dedup.KeepFirst(s.Scope("state"), big, append(opts, dedup.UID("state"))...).Rows
	got := beam.ParDo(s, formatTimedShortID, tagged)
	passert.Equals(s, got, beam.ParDo(s, formatTimedShortID, inState))
	passert.Count(s, got, "one row per key", 12)
	c := run(t, p)
	assert.Equal(t, int64(2*rows), c.RowsIn)
	assert.Equal(t, int64(2*12), c.Emitted)
	assert.Zero(t, c.Pending())
	assert.Positive(t, c.CandidatesReplaced)
	assert.Positive(t, c.LateDropped)
}

// padEvent pads a row's event past the timer-tag limit of a candidate,
// after a "|" that formatTimedShortID cuts at.
func padEvent(e timedEvent) timedEvent {
	e.Event += "|" + strings.Repeat("x", 2000)
	return e
}

// formatTimedShortID is formatTimed without padEvent's padding.
func formatTimedShortID(ts beam.EventTime, e timedEvent) string {
	e.Event, _, _ = strings.Cut(e.Event, "|")
	return formatTimed(ts, e)
}

// Event time to the microsecond: a row 500 µs earlier than the candidate,
// in the candidate's millisecond, arriving after it, replaces it, and the
// replaced candidate's timer (set for the same millisecond) fires stale:
// one row per key, the earliest.
func TestEventTime_AnEarlierRowInTheCandidatesMillisecondReplacesItOnce(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	ts := teststream.NewConfig()
	base := at(10, 5)
	var later, earlier []any
	var want []any
	for i := range 5 {
		u := fmt.Sprintf("u%d", i)
		later = append(later, timedEvent{u, "later", base.Add(700 * time.Microsecond)})
		earlier = append(earlier, timedEvent{u, "earlier", base.Add(200 * time.Microsecond)})
		want = append(want, u+"/earlier@10:05")
	}
	require.NoError(t, ts.AdvanceWatermark(ms(at(10, 0))))
	require.NoError(t, ts.AddElements(ms(base), later...))
	require.NoError(t, ts.AdvanceWatermark(ms(at(10, 1))))
	require.NoError(t, ts.AddElements(ms(base), earlier...))
	require.NoError(t, ts.AdvanceWatermarkToInfinity())
	out := dedup.KeepFirst(s, teststream.Create(s, ts), rowspec.PartitionBy("user_id"), rowspec.OnTime("rowtime")).Rows
	passert.Equals(s, beam.ParDo(s, formatTimed, out), want...)
	c := run(t, p)
	assert.Equal(t, int64(5), c.Emitted)
	assert.Equal(t, int64(5), c.CandidatesReplaced)
}

// The same in a fixed window's last millisecond: the replaced candidate's
// timer moves past the window's end, where it never matters.
func TestEventTime_AnEarlierRowInTheLastMillisecondOfAWindowReplacesItOnce(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	ts := teststream.NewConfig()
	last := at(10, 10).Add(-time.Millisecond) // the last millisecond of [10:00, 10:10)
	require.NoError(t, ts.AdvanceWatermark(ms(at(10, 0))))
	require.NoError(t, ts.AddElements(ms(last), timedEvent{"u1", "later", last.Add(700 * time.Microsecond)}))
	require.NoError(t, ts.AdvanceWatermark(ms(at(10, 1))))
	require.NoError(t, ts.AddElements(ms(last), timedEvent{"u1", "earlier", last.Add(200 * time.Microsecond)}))
	require.NoError(t, ts.AdvanceWatermarkToInfinity())
	in := beam.WindowInto(s, window.NewFixedWindows(10*time.Minute), teststream.Create(s, ts))
	out := dedup.KeepFirst(s, in, rowspec.PartitionBy("user_id"), rowspec.OnTime("rowtime")).Rows
	passert.Equals(s, beam.WindowInto(s, window.NewGlobalWindows(), beam.ParDo(s, formatTimed, out)), "u1/earlier@10:09")
	c := run(t, p)
	assert.Equal(t, int64(1), c.Emitted)
}

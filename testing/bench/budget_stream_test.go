package bench_test

import (
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/teststream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/testing/bench"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// streamKeys is the number of keys of the end-of-stream budget.
const streamKeys = 100

// TestStateBudget_EndOfAFiniteStream counts the timers of event-time
// KeepFirst with StateTTL on a finite stream (a TestStream that ends with
// the watermark at infinity), as a test of a user's pipeline runs it: 100
// keys, two rows each, their candidates emitted while the stream runs or
// still pending when it ends. At the end the watermark jumps past every
// cleanup check long before any key's processing-time expiry (an hour
// away), so each check finds its key unexpired. The budget: every key takes
// at most two timer firings at the end (a timer fires only once it is set,
// so timer sets bound firings: its finalization and its cleanup check), and
// its cleanup check reads the state once: against the same run with
// CleanupTimers(false), which sets one timer per key (its finalization,
// whose tag carries the candidate, so its firing reads nothing), at most
// one more timer and one more read per key. (Re-arming the check until the
// processing-time expiry passed cost 33 timers and 33 reads per key here.)
func TestStateBudget_EndOfAFiniteStream(t *testing.T) {
	keys := int64(streamKeys)
	for _, tc := range []struct {
		name           string
		emittedInPlace bool // the watermark passes every candidate before the end
	}{
		{"emitted while the stream runs", true},
		{"pending at the end", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			without := endOfStreamRun(t, tc.emittedInPlace, dedup.CleanupTimers(false))
			with := endOfStreamRun(t, tc.emittedInPlace)
			t.Logf("CleanupTimers(false): %d timer sets, %d state reads; CleanupTimers(true): %d timer sets, %d state reads",
				without.TimerSets, without.StateReads, with.TimerSets, with.StateReads)
			assert.Equal(t, keys, without.TimerSets, "without cleanup: a finalization per key")
			assert.LessOrEqual(t, without.StateReads, 2*keys, "without cleanup: at most a read per row, none per firing")
			assert.LessOrEqual(t, with.TimerSets, 2*keys, "at most two timers, so two firings, per key")
			assert.LessOrEqual(t, with.StateReads, without.StateReads+keys, "at most one read per key for its cleanup check")
		})
	}
}

// endOfStreamRun runs the end-of-stream budget's pipeline with opts and
// checks that every row is accounted for. With emitInPlace the watermark
// passes every candidate before the stream ends.
func endOfStreamRun(t *testing.T, emitInPlace bool, opts ...dedup.Option) dedup.Counters {
	t.Helper()
	p, s := beam.NewPipelineWithRoot()
	ts := teststream.NewConfig()
	start := bench.BaseTime
	require.NoError(t, ts.AdvanceWatermark(start))
	for i := range streamKeys {
		at := start + int64(i)*1000
		key := "user-" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		require.NoError(t, ts.AddElements(at, bench.Row{Key: key, TS: at, Seq: int64(i)}, bench.Row{Key: key, TS: at + 1, Seq: int64(i) + 1000}))
	}
	if emitInPlace {
		require.NoError(t, ts.AdvanceWatermark(start+streamKeys*1000+1))
	}
	require.NoError(t, ts.AdvanceWatermarkToInfinity())
	in := teststream.Create(s, ts)
	opts = append([]dedup.Option{rowspec.PartitionBy("key"), rowspec.OnTime("ts"), dedup.StateTTL(time.Hour), dedup.MiniBatch(false)}, opts...)
	bench.Sink(s, dedup.KeepFirst(s, in, opts...).Rows)
	pr, _ := runOnPrism(t, p, 2*time.Minute)
	c := dedup.ReadCounters(pr)
	require.Equal(t, int64(streamKeys), bench.OutCount(pr), "one row out per key")
	require.Equal(t, int64(2*streamKeys), c.RowsIn)
	require.Equal(t, int64(streamKeys), c.Emitted)
	require.Zero(t, c.Pending(), "every row accounted for")
	return c
}

package core_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/transforms/dedup/internal/core"
	"github.com/beamdedup/beamdedup/transforms/rowkind"
)

// The input/output tables of the DEDUPLICATE_KEEP_FIRST spec
// (shared/seeds/000_de0fe15b057f4358.txt), exactly, through the core and the
// runner model. Processing-time arrivals (@10:00, ...) drive the fake clock;
// rows without one arrive a second apart. Watermarkless rows carry their
// arrival time as event time. Every table runs with and without cleanup
// timers: the semantics must not depend on a timer having fired.

// withAndWithoutCleanupTimers runs f for CleanupTimers true and false.
func withAndWithoutCleanupTimers(t *testing.T, cfg core.Config, f func(t *testing.T, cfg core.Config)) {
	for _, cleanup := range []bool{true, false} {
		name := "cleanup_timers"
		if !cleanup {
			name = "no_cleanup_timers"
		}
		t.Run(name, func(t *testing.T) {
			c := cfg
			c.CleanupTimers = cleanup
			f(t, c)
		})
	}
}

// watermarklessRow is one row of a watermarkless table.
type watermarklessRow struct {
	at   int64 // processing-time arrival
	key  string
	kind rowkind.Kind
	row  string
	want core.Outcome
}

// runWatermarkless feeds the rows at their arrival times and checks each
// row's outcome; it returns the sim for the output checks.
func runWatermarkless(t *testing.T, cfg core.Config, rows []watermarklessRow) *sim {
	t.Helper()
	s := newSim(t, cfg, rows[0].at)
	for _, r := range rows {
		s.AdvanceClock(r.at)
		d := s.Arrive(r.key, r.kind, r.at, r.row)
		assert.Equal(t, r.want, d.Outcome, "outcome of %s @%d", r.row, r.at)
	}
	return s
}

// insertsASecondApart builds rows of one key arriving a second apart.
func insertsASecondApart(key string, rowsAndOutcomes ...any) []watermarklessRow {
	var rows []watermarklessRow
	for i := 0; i < len(rowsAndOutcomes); i += 2 {
		rows = append(rows, watermarklessRow{
			at: at(10, 0) + int64(i/2)*second, key: key, kind: rowkind.Insert,
			row: rowsAndOutcomes[i].(string), want: rowsAndOutcomes[i+1].(core.Outcome),
		})
	}
	return rows
}

// 4.1.1 and 4.1.3.1: one global partition; only the first row observed.
func unkeyedWatermarkless(t *testing.T) {
	withAndWithoutCleanupTimers(t, core.Config{ResetOnDuplicate: true}, func(t *testing.T, cfg core.Config) {
		s := runWatermarkless(t, cfg, insertsASecondApart("",
			"+I[id: 1, name: 'Vas']", core.Emit,
			"+I[id: 1, name: 'Bob']", core.DropDuplicate,
		))
		assert.Equal(t, []string{"+I[id: 1, name: 'Vas']"}, s.Rows())
	})
}

func TestSpec_4_1_1_DefaultSignature_EmitsOnlyTheFirstRowObserved(t *testing.T) {
	unkeyedWatermarkless(t)
}

func TestSpec_4_1_3_1_UnkeyedWatermarkless_KeepsOnlyTheFirstRowObserved(t *testing.T) {
	unkeyedWatermarkless(t)
}

func TestSpec_4_1_3_2_KeyedWatermarkless_KeepsTheFirstRowPerKey(t *testing.T) {
	withAndWithoutCleanupTimers(t, core.Config{ResetOnDuplicate: true}, func(t *testing.T, cfg core.Config) {
		s := runWatermarkless(t, cfg, insertsASecondApart("Vas",
			"+I[user_name: 'Vas', event: 'login']", core.Emit,
			"+I[user_name: 'Vas', event: 'click']", core.DropDuplicate,
		))
		assert.Equal(t, []string{"+I[user_name: 'Vas', event: 'login']"}, s.Rows())
	})
}

func TestSpec_4_1_3_3_KeyedWatermarklessStateTTL_ReemitsAfterExpiry(t *testing.T) {
	withAndWithoutCleanupTimers(t, core.Config{StateTTL: 5 * minute, ResetOnDuplicate: true}, func(t *testing.T, cfg core.Config) {
		const login = "+I[user_name: 'Vas', event: 'login']"
		s := newSim(t, cfg, at(10, 0))
		d := s.Arrive("Vas", rowkind.Insert, at(10, 0), login+"@10:00")
		assert.Equal(t, core.Emit, d.Outcome)

		s.AdvanceClock(at(10, 3))
		d = s.Arrive("Vas", rowkind.Insert, at(10, 3), login+"@10:03")
		assert.Equal(t, core.DropDuplicate, d.Outcome)
		assert.True(t, d.Refreshed, "the 10:03 duplicate refreshes the retention (reset_ttl_on_duplicate defaults to true)")
		assert.Equal(t, at(10, 8), s.State("Vas").ExpireAt, "retention refreshed from 10:05 to 10:08")

		s.AdvanceClock(at(10, 10))
		d = s.Arrive("Vas", rowkind.Insert, at(10, 10), login+"@10:10")
		assert.Equal(t, core.Emit, d.Outcome, "10:10 is after the 10:08 expiry: a new period")

		assert.Equal(t, []emission{
			{Row: login + "@10:00", Key: "Vas", EventTime: at(10, 0), ProcTime: at(10, 0)},
			{Row: login + "@10:10", Key: "Vas", EventTime: at(10, 10), ProcTime: at(10, 10)},
		}, s.Out())
	})
}

func TestSpec_4_1_3_4_WholeRowAsKeyWatermarkless_KeepsOneRowPerDistinctPayload(t *testing.T) {
	withAndWithoutCleanupTimers(t, core.Config{ResetOnDuplicate: true}, func(t *testing.T, cfg core.Config) {
		const trade = "+I[trade_id: 't1', ticker: 'AAPL', quantity: 1, price: 10]"
		// PARTITION BY every column: the key is the whole row.
		rows := insertsASecondApart(trade, trade, core.Emit, trade, core.DropDuplicate)
		s := runWatermarkless(t, cfg, rows)
		assert.Equal(t, []string{trade}, s.Rows())
	})
}

// boundedSource is a source that declares
// WATERMARK FOR rowtime AS rowtime - lag: once it has read a row, its
// watermark is max(rowtime) - lag.
type boundedSource struct {
	s      *sim
	lag    int64
	maxRow int64
	seen   bool
}

// read delivers a row at processing time proc, without moving the watermark.
func (b *boundedSource) read(proc int64, key string, rowtime int64, row string) core.Decision {
	b.s.t.Helper()
	b.s.AdvanceClock(proc)
	d := b.s.Arrive(key, rowkind.Insert, rowtime, row)
	if !b.seen || rowtime > b.maxRow {
		b.maxRow, b.seen = rowtime, true
	}
	return d
}

// advance moves the watermark to max(rowtime) - lag.
func (b *boundedSource) advance() { b.s.AdvanceWatermark(b.maxRow - b.lag) }

// arrive reads a row, then advances the watermark past it.
func (b *boundedSource) arrive(proc int64, key string, rowtime int64, row string) core.Decision {
	b.s.t.Helper()
	d := b.read(proc, key, rowtime, row)
	b.advance()
	return d
}

// watermarkGatedEarliest runs the table of 4.1.2.2.1 / 4.1.3.5 and the
// late row after it.
func watermarkGatedEarliest(t *testing.T, cfg core.Config) {
	const (
		click  = "+I[user_id: 'u1', event: 'click',  rowtime: 10:02]"
		view   = "+I[user_id: 'u1', event: 'view',   rowtime: 10:01]"
		scroll = "+I[user_id: 'u1', event: 'scroll', rowtime: 10:06]"
		signup = "+I[user_id: 'u1', event: 'signup', rowtime: 10:00]"
	)
	s := newSim(t, cfg, at(12, 0))
	src := &boundedSource{s: s, lag: 5 * minute}

	d := src.arrive(at(12, 0), "u1", at(10, 2), click)
	assert.Equal(t, core.BecomeCandidate, d.Outcome)
	assert.Equal(t, at(9, 57), s.wm, "watermark → 09:57")

	d = src.arrive(at(12, 1), "u1", at(10, 1), view)
	assert.Equal(t, core.ReplaceCandidate, d.Outcome, "on time (>= 09:57); earlier event time → candidate")
	assert.Equal(t, at(9, 57), s.wm)
	assert.Empty(t, s.Out(), "nothing is emitted before the watermark reaches the candidate")

	d = src.read(at(12, 2), "u1", at(10, 6), scroll)
	assert.Equal(t, core.DropDuplicate, d.Outcome, "later, not the candidate")
	assert.Empty(t, s.Out(), "the watermark is still 09:57")
	src.advance()
	assert.Equal(t, at(10, 1), s.wm, "watermark → 10:01")

	assert.Equal(t, []emission{{Row: view, Key: "u1", EventTime: at(10, 1), ProcTime: at(12, 2)}}, s.Out(),
		"watermark reached 10:01 → candidate finalized and emitted @12:02 with its event time")

	d = src.arrive(at(12, 5), "u1", at(10, 0), signup)
	assert.Equal(t, core.DropLate, d.Outcome, "u1 already finalized; 10:00 is below the watermark")
	assert.Equal(t, at(10, 1), s.wm)
	assert.Equal(t, []string{view}, s.Rows(), "the late row is dropped")
}

func TestSpec_4_1_2_2_1_WatermarkGatedEarliestSelection(t *testing.T) {
	withAndWithoutCleanupTimers(t, core.Config{EventTime: true, ResetOnDuplicate: true}, watermarkGatedEarliest)
}

func TestSpec_4_1_3_5_KeyedEventTimeStateTTL_EmitsTheEarliestAtTheWatermarkAndDropsLateRows(t *testing.T) {
	withAndWithoutCleanupTimers(t, core.Config{EventTime: true, StateTTL: 5 * minute, ResetOnDuplicate: true}, watermarkGatedEarliest)
}

// 4.1.3.6: the same input with reset_ttl_on_duplicate true and false.
func TestSpec_4_1_3_6_KeyedStateTTLDuplicateRefresh_TrueKeepsTheKeyFalseReemits(t *testing.T) {
	const login = "+I[user_name: 'Vas', event: 'login']"
	arrivals := []int64{at(10, 0), at(10, 3), at(10, 7), at(10, 10)}
	run := func(t *testing.T, cfg core.Config, want []core.Outcome) *sim {
		require.Len(t, want, len(arrivals))
		s := newSim(t, cfg, arrivals[0])
		for i, a := range arrivals {
			s.AdvanceClock(a)
			d := s.Arrive("Vas", rowkind.Insert, a, login+"#"+string(rune('0'+i)))
			assert.Equal(t, want[i], d.Outcome, "row %d", i)
		}
		return s
	}
	t.Run("reset_true", func(t *testing.T) {
		withAndWithoutCleanupTimers(t, core.Config{StateTTL: 5 * minute, ResetOnDuplicate: true}, func(t *testing.T, cfg core.Config) {
			s := run(t, cfg, []core.Outcome{core.Emit, core.DropDuplicate, core.DropDuplicate, core.DropDuplicate})
			assert.Equal(t, []emission{{Row: login + "#0", Key: "Vas", EventTime: at(10, 0), ProcTime: at(10, 0)}}, s.Out(),
				"each duplicate refreshes the TTL (10:05 → 10:08 → 10:12): 10:03, 10:07, 10:10 all dropped")
			assert.Equal(t, at(10, 15), s.State("Vas").ExpireAt)
		})
	})
	t.Run("reset_false", func(t *testing.T) {
		withAndWithoutCleanupTimers(t, core.Config{StateTTL: 5 * minute, ResetOnDuplicate: false}, func(t *testing.T, cfg core.Config) {
			s := run(t, cfg, []core.Outcome{core.Emit, core.DropDuplicate, core.Emit, core.DropDuplicate})
			assert.Equal(t, []emission{
				{Row: login + "#0", Key: "Vas", EventTime: at(10, 0), ProcTime: at(10, 0)},
				{Row: login + "#2", Key: "Vas", EventTime: at(10, 7), ProcTime: at(10, 7)},
			}, s.Out(), "TTL fixed from the first record: expires 10:05, so 10:07 starts a new period")
		})
	})
}

func TestSpec_4_1_3_7_UpdatingInput_EmitsTheFirstInsertAndSwallowsEveryLaterChange(t *testing.T) {
	withAndWithoutCleanupTimers(t, core.Config{ResetOnDuplicate: true}, func(t *testing.T, cfg core.Config) {
		rows := []watermarklessRow{
			{key: "Vas", kind: rowkind.Delete, row: "-D[user_name: 'Vas', event: 'logout']", want: core.IgnoreRetraction},
			{key: "Vas", kind: rowkind.Insert, row: "+I[user_name: 'Vas', event: 'login']", want: core.Emit},
			// "key seen again → swallowed": the core counts a +I/+U of an
			// emitted key as a dropped duplicate, -U/-D as swallowed.
			{key: "Vas", kind: rowkind.Insert, row: "+I[user_name: 'Vas', event: 'login'] again", want: core.DropDuplicate},
			{key: "Vas", kind: rowkind.UpdateBefore, row: "-U[user_name: 'Vas', event: 'login']", want: core.Swallow},
			{key: "Vas", kind: rowkind.UpdateAfter, row: "+U[user_name: 'Vas', event: 'click']", want: core.DropDuplicate},
			{key: "Vas", kind: rowkind.Delete, row: "-D[user_name: 'Vas', event: 'click']", want: core.Swallow},
		}
		for i := range rows {
			rows[i].at = at(10, 0) + int64(i)*second
		}
		s := runWatermarkless(t, cfg, rows)
		assert.Equal(t, []string{"+I[user_name: 'Vas', event: 'login']"}, s.Rows())
	})
}

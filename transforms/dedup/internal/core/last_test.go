package core_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/internal/rowcol"
	"github.com/beamdedup/beamdedup/transforms/dedup/internal/core"
	"github.com/beamdedup/beamdedup/transforms/rowkind"
)

// The rules of KeepLast (docs/keeplast.md, "Semantics" 1-4 and 7), one by one,
// through the core and the runner model with a fake clock.

type lastIn struct {
	kind rowkind.Kind
	et   int64
	seq  string
	row  string
	want core.Outcome
}

func runLast(t *testing.T, cfg core.Config, ins []lastIn) *sim {
	t.Helper()
	s := newSim(t, cfg, at(12, 0))
	for i, in := range ins {
		d := s.ArriveLast("k", in.kind, in.et, in.seq, in.row)
		require.Equal(t, in.want, d.Outcome, "row %d (%s)", i, in.row)
	}
	return s
}

// Seed 003's order o0018: created, paid, a resend of paid.
func TestLast_Rule2_FirstRowInsertsAReplacementIsAPairAnIdenticalRowNothing(t *testing.T) {
	s := runLast(t, core.Config{}, []lastIn{
		{rowkind.Insert, at(10, 0), "", "created", core.Inserted},
		{rowkind.Insert, at(10, 5), "", "paid", core.Updated},
		{rowkind.Insert, at(10, 5), "", "paid", core.DropDuplicate},
	})
	assert.Equal(t, []string{"+I created", "-U created", "+U paid"}, s.Rows())
	assert.Equal(t, []byte("paid"), s.State("k").Cand)
}

func TestLast_Rule2_UpsertEmitsOnlyTheNewRow(t *testing.T) {
	s := runLast(t, core.Config{Upsert: true}, []lastIn{
		{rowkind.Insert, at(10, 0), "", "a", core.Inserted},
		{rowkind.Insert, at(10, 1), "", "b", core.Updated},
	})
	assert.Equal(t, []string{"+I a", "+U b"}, s.Rows())
}

func TestLast_Rule1_ArrivalOrderWithoutOrderingEveryRowReplaces(t *testing.T) {
	s := runLast(t, core.Config{}, []lastIn{
		{rowkind.Insert, at(10, 5), "", "late-time", core.Inserted},
		{rowkind.Insert, at(10, 1), "", "early-time", core.Updated},
	})
	assert.Equal(t, []string{"+I late-time", "-U late-time", "+U early-time"}, s.Rows())
}

func TestLast_Rule1_OrderedARowBelowTheStoredValueIsOutOfOrderATieReplaces(t *testing.T) {
	s := runLast(t, core.Config{Ordered: true}, []lastIn{
		{rowkind.Insert, at(10, 5), "", "t5", core.Inserted},
		{rowkind.Insert, at(10, 1), "", "t1", core.OutOfOrder},
		{rowkind.Insert, at(10, 5), "", "t5-tie", core.Updated},
		{rowkind.Insert, at(10, 9), "", "t9", core.Updated},
	})
	assert.Equal(t, []string{"+I t5", "-U t5", "+U t5-tie", "-U t5-tie", "+U t9"}, s.Rows())
}

// A row identical to the stored one but later in the order (SequenceBy
// ties, a later element time) is a duplicate that now holds the key's
// value: a row between the two is out of order, as the bounded merge (the
// largest value wins) and the mini-batch fold decide.
func TestLast_Rule1_OrderedAnIdenticalLaterRowHoldsTheValue(t *testing.T) {
	s := runLast(t, core.Config{Ordered: true}, []lastIn{
		{rowkind.Insert, at(10, 1), "b", "R", core.Inserted},
		{rowkind.Insert, at(10, 3), "b", "R", core.DropDuplicate},
		{rowkind.Insert, at(10, 2), "b", "X", core.OutOfOrder},
	})
	assert.Equal(t, []string{"+I R"}, s.Rows())
	assert.Equal(t, at(10, 3), s.State("k").CandTime)
}

func TestLast_Rule1_SequenceValueComesBeforeTheEventTime(t *testing.T) {
	s := runLast(t, core.Config{Ordered: true}, []lastIn{
		{rowkind.Insert, at(10, 5), "b", "seq-b", core.Inserted},
		{rowkind.Insert, at(10, 9), "a", "seq-a-later-time", core.OutOfOrder},
		{rowkind.Insert, at(10, 1), "c", "seq-c-earlier-time", core.Updated},
	})
	assert.Equal(t, []string{"+I seq-b", "-U seq-b", "+U seq-c-earlier-time"}, s.Rows())
	assert.Equal(t, []byte("c"), s.State("k").Seq)
}

func TestLast_Rule3_ARetractionOfAStoredKeyDeletesItAndTheNextRowInserts(t *testing.T) {
	for _, kind := range []rowkind.Kind{rowkind.UpdateBefore, rowkind.Delete} {
		s := runLast(t, core.Config{}, []lastIn{
			{rowkind.Delete, at(10, 0), "", "ghost", core.IgnoreRetraction},
			{rowkind.Insert, at(10, 1), "", "a", core.Inserted},
			{kind, at(10, 2), "", "a-retracted", core.DeletedIn},
			{rowkind.UpdateAfter, at(10, 3), "", "b", core.Inserted},
		})
		assert.Equal(t, []string{"+I a", "-D a", "+I b"}, s.Rows(), "-D carries the stored row, not the retraction's")
	}
}

func TestLast_Rule3_OrderedAStaleRetractionIsOutOfOrder(t *testing.T) {
	s := runLast(t, core.Config{Ordered: true}, []lastIn{
		{rowkind.Insert, at(10, 5), "", "a", core.Inserted},
		{rowkind.Delete, at(10, 1), "", "old-delete", core.OutOfOrder},
	})
	assert.Equal(t, []string{"+I a"}, s.Rows())
}

// Ordered mode: a deletion is remembered with its value, so a row older than
// it that arrives later stays deleted (as the bounded merge decides), and so
// does a row as old as it (a retraction ranks after a live row of its
// value, in any arrival order); a newer one inserts.
func TestLast_Rule3_OrderedADeletionKeepsOlderRowsOut(t *testing.T) {
	s := runLast(t, core.Config{Ordered: true}, []lastIn{
		{rowkind.Delete, at(10, 5), "", "unseen-delete", core.IgnoreRetraction},
		{rowkind.Insert, at(10, 3), "", "older", core.OutOfOrder},
		{rowkind.Insert, at(10, 5), "", "as-old", core.OutOfOrder},
		{rowkind.Insert, at(10, 6), "", "newer", core.Inserted},
		{rowkind.UpdateBefore, at(10, 7), "", "newer", core.DeletedIn},
		{rowkind.UpdateAfter, at(10, 7), "", "same-instant", core.OutOfOrder},
		{rowkind.UpdateAfter, at(10, 8), "", "later", core.Inserted},
	})
	assert.Equal(t, []string{"+I newer", "-D newer", "+I later"}, s.Rows())
}

// A resent retraction of a deleted key finds its tombstone as the first
// copy left it: nothing to write.
func TestLast_Rule3_OrderedAResentRetractionWritesNoState(t *testing.T) {
	cfg := core.Config{Ordered: true}
	var st core.State
	first := core.Last{Config: cfg}.OnRow(&st, core.Row{Kind: rowkind.Delete, Time: at(10, 5)}, at(12, 0))
	require.Equal(t, core.IgnoreRetraction, first.Outcome)
	require.True(t, first.Write, "the first retraction writes the tombstone")
	again := core.Last{Config: cfg}.OnRow(&st, core.Row{Kind: rowkind.Delete, Time: at(10, 5)}, at(12, 1))
	assert.Equal(t, core.IgnoreRetraction, again.Outcome)
	assert.False(t, again.Write, "the same tombstone again")
	later := core.Last{Config: cfg}.OnRow(&st, core.Row{Kind: rowkind.Delete, Time: at(10, 6)}, at(12, 2))
	assert.True(t, later.Write, "a later retraction moves the tombstone")
}

func TestLast_Rule4_StateTTLFromTheLastAcceptedRowInclusiveThenInsertsAgain(t *testing.T) {
	cfg := core.Config{StateTTL: 5 * minute, CleanupTimers: false}
	s := newSim(t, cfg, at(12, 0))
	s.ArriveLast("k", rowkind.Insert, at(10, 0), "", "a")
	s.AdvanceClock(at(12, 4))
	require.Equal(t, core.Updated, s.ArriveLast("k", rowkind.Insert, at(10, 1), "", "b").Outcome, "within TTL")
	s.AdvanceClock(at(12, 8))
	require.Equal(t, core.Updated, s.ArriveLast("k", rowkind.Insert, at(10, 2), "", "c").Outcome, "the update at 12:04 refreshed retention")
	s.AdvanceClock(at(12, 13))
	d := s.ArriveLast("k", rowkind.Insert, at(10, 3), "", "d")
	assert.Equal(t, core.Inserted, d.Outcome, "expired at exactly 12:08 + 5 min")
	assert.True(t, d.Expired)
	assert.Equal(t, []string{"+I a", "-U a", "+U b", "-U b", "+U c", "+I d"}, s.Rows())
}

func TestLast_Rule4_DuplicateRefreshesRetentionOnlyWithResetOnDuplicate(t *testing.T) {
	for _, reset := range []bool{true, false} {
		s := newSim(t, core.Config{StateTTL: 5 * minute, ResetOnDuplicate: reset}, at(12, 0))
		s.ArriveLast("k", rowkind.Insert, at(10, 0), "", "a")
		s.AdvanceClock(at(12, 4))
		require.Equal(t, core.DropDuplicate, s.ArriveLast("k", rowkind.Insert, at(10, 0), "", "a").Outcome)
		s.AdvanceClock(at(12, 6))
		want := core.DropDuplicate
		if !reset {
			want = core.Inserted
		}
		assert.Equal(t, want, s.ArriveLast("k", rowkind.Insert, at(10, 0), "", "a").Outcome, "reset=%v", reset)
	}
}

func TestLast_Rule4_RetractOnExpiryOnArrivalEmitsDeleteThenInsert(t *testing.T) {
	s := newSim(t, core.Config{StateTTL: 5 * minute, RetractOnExpiry: true}, at(12, 0))
	s.ArriveLast("k", rowkind.Insert, at(10, 0), "", "a")
	s.AdvanceClock(at(12, 5))
	d := s.ArriveLast("k", rowkind.Insert, at(10, 1), "", "b")
	assert.Equal(t, core.Inserted, d.Outcome)
	assert.Equal(t, []string{"+I a", "-D a", "+I b"}, s.Rows())
}

func TestLast_Rule4_RetractOnExpiryFromTheCleanupTimer(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  core.Config
		tick func(s *sim)
	}{
		{"processing time", core.Config{StateTTL: 5 * minute, CleanupTimers: true, RetractOnExpiry: true}, func(s *sim) { s.AdvanceClock(at(12, 6)) }},
		{"event time", core.Config{EventTTL: 5 * minute, CleanupTimers: true, RetractOnExpiry: true}, func(s *sim) { s.AdvanceWatermark(at(10, 6)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(t, tc.cfg, at(12, 0))
			s.AdvanceWatermark(at(9, 0))
			s.ArriveLast("k", rowkind.Insert, at(10, 0), "", "a")
			tc.tick(s)
			assert.Equal(t, []string{"+I a", "-D a"}, s.Rows())
			assert.Equal(t, core.None, s.State("k").Phase)
			assert.Equal(t, core.Inserted, s.ArriveLast("k", rowkind.Insert, at(10, 7), "", "b").Outcome)
		})
	}
}

func TestLast_Rule4_WithoutRetractOnExpiryTheTimerDeletesSilently(t *testing.T) {
	s := newSim(t, core.Config{StateTTL: 5 * minute, CleanupTimers: true}, at(12, 0))
	s.ArriveLast("k", rowkind.Insert, at(10, 0), "", "a")
	s.AdvanceClock(at(12, 6))
	assert.Equal(t, []string{"+I a"}, s.Rows())
	assert.Equal(t, core.None, s.State("k").Phase)
}

// A deleted key's cleanup timer still fires (timers are never cleared) and
// must find nothing to retract.
func TestLast_Rule4_TheTimerOfADeletedKeyIsStale(t *testing.T) {
	s := newSim(t, core.Config{StateTTL: 5 * minute, CleanupTimers: true, RetractOnExpiry: true}, at(12, 0))
	s.ArriveLast("k", rowkind.Insert, at(10, 0), "", "a")
	s.ArriveLast("k", rowkind.Delete, at(10, 1), "", "a")
	s.AdvanceClock(at(12, 6))
	assert.Equal(t, []string{"+I a", "-D a"}, s.Rows())
}

func TestLast_Rule7_OnlyCleanupTimersAtMostOneFamily(t *testing.T) {
	for _, tc := range []struct {
		cfg  core.Config
		want core.TimerKind
	}{
		{core.Config{Ordered: true, StateTTL: minute, CleanupTimers: true}, core.Cleanup},
		{core.Config{EventTTL: minute, StateTTL: minute, CleanupTimers: true}, core.Cleanup},
		{core.Config{Ordered: true}, core.NoTimer},
	} {
		s := newSim(t, tc.cfg, at(12, 0)) // sim.arm checks the family of every timer
		s.ArriveLast("k", rowkind.Insert, at(10, 0), "", "a")
		d := s.ArriveLast("k", rowkind.Insert, at(10, 1), "", "b")
		assert.Equal(t, tc.want, d.Timer.Kind, "%+v: a cleanup timer or none, never a finalization", tc.cfg)
	}
}

func TestKeepLastReplaces_IsTheOrderedRule(t *testing.T) {
	replaces := func(seq []byte, t int64, storedSeq []byte, storedT int64) bool {
		return core.KeepLast.Replaces(rowcol.Order{Seq: seq, Time: t}, rowcol.Order{Seq: storedSeq, Time: storedT})
	}
	assert.True(t, replaces(nil, 5, nil, 5), "a tie replaces")
	assert.False(t, replaces(nil, 4, nil, 5))
	assert.True(t, replaces([]byte{2}, 1, []byte{1}, 9))
	assert.False(t, replaces([]byte{1}, 9, []byte{2}, 1))
}

package core_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/internal/micros"
	"github.com/beamdedup/beamdedup/internal/rowcol"
	"github.com/beamdedup/beamdedup/transforms/dedup/internal/core"
	"github.com/beamdedup/beamdedup/transforms/rowkind"
)

func TestDirection_ReplacesByTheComparatorsTieRules(t *testing.T) {
	live := func(us int64) rowcol.Order { return rowcol.Order{Time: us} }
	del := func(us int64) rowcol.Order { return rowcol.Order{Time: us, Retraction: true} }
	for _, tc := range []struct {
		name        string
		a, b        rowcol.Order
		first, last bool // does a, arriving, replace b?
	}{
		{"earlier", live(1), live(2), true, false},
		{"later", live(2), live(1), false, true},
		{"a microsecond later in the same millisecond", live(1001), live(1000), false, true},
		{"tie", live(1), live(1), false, true},
		{"a deletion of the stored row's value", del(1), live(1), false, true},
		{"a live row as old as a deletion", live(1), del(1), true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.first, core.KeepFirst.Replaces(tc.a, tc.b), "KeepFirst")
			assert.Equal(t, tc.last, core.KeepLast.Replaces(tc.a, tc.b), "KeepLast")
		})
	}
}

// The merge is what makes the bounded result repeatable: earliest timestamp,
// ties to the smaller encoding, in any order of merging.
func TestMerge_KeepFirstKeepsEarliestThenSmallestInAnyOrder(t *testing.T) {
	a := core.Candidate{Has: true, TS: 5, Row: []byte("b"), Rows: 1}
	b := core.Candidate{Has: true, TS: 5, Row: []byte("a"), Rows: 1}
	c := core.Candidate{Has: true, TS: 9, Row: []byte("0"), Rows: 1}
	d := core.Candidate{Has: true, TS: 5, Micros: 1, Row: []byte("0"), Rows: 1}
	r := core.Candidate{Retractions: 1}
	m := core.KeepFirst.Merge
	want := core.Candidate{Has: true, TS: 5, Row: []byte("a"), Rows: 4, Retractions: 1}
	assert.Equal(t, want, m(m(a, b), m(c, m(r, d))))
	assert.Equal(t, want, m(m(r, c), m(d, m(b, a))))
	assert.Equal(t, want, m(a, m(r, m(c, m(b, d)))), "a microsecond later loses, whatever its encoding")
}

// With KeepLast the merge keeps the largest (seq, time, kind, row): the
// sequence value before the time, and a -D after the +U of its value.
func TestMerge_KeepLastKeepsLargestSeqThenTimeThenKindThenRowInAnyOrder(t *testing.T) {
	a := core.Candidate{Has: true, TS: 9, Seq: []byte{1}, Row: []byte("z"), Rows: 1}
	b := core.Candidate{Has: true, TS: 1, Seq: []byte{2}, Row: []byte("a"), Rows: 1}
	c := core.Candidate{Has: true, TS: 1, Seq: []byte{2}, Row: []byte("b"), Rows: 1}
	r := core.Candidate{Has: true, Retract: true, TS: 1, Seq: []byte{2}, Row: []byte("0"), Retractions: 1}
	want := core.Candidate{Has: true, Retract: true, TS: 1, Seq: []byte{2}, Row: []byte("0"), Rows: 3, Retractions: 1}
	cands := []core.Candidate{a, b, c, r}
	m := core.KeepLast.Merge
	rng := rand.New(rand.NewPCG(5, 6))
	for range 20 {
		rng.Shuffle(len(cands), func(i, j int) { cands[i], cands[j] = cands[j], cands[i] })
		assert.Equal(t, want, m(m(cands[0], cands[1]), m(cands[2], cands[3])), "the -D beats the live rows of its value")
		assert.Equal(t, want, m(cands[0], m(cands[1], m(cands[2], cands[3]))))
	}
	assert.Equal(t, c.Row, m(m(a, b), c).Row, "the larger row wins a tie of live rows")
	assert.Equal(t, a.Row, core.KeepFirst.Merge(core.KeepFirst.Merge(a, b), c).Row, "First: the smallest seq wins over an earlier time")
}

func TestSettle_AccountsForEveryMergedRowOnce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rules core.Rules
		m     core.Candidate
		emit  bool
		kind  rowkind.Kind
		want  map[core.Outcome]int64
	}{
		{"First: kept row, duplicates, swallowed", core.First{}, core.Candidate{Has: true, Rows: 3, Retractions: 2}, true, rowkind.Insert,
			map[core.Outcome]int64{core.Emit: 1, core.DropDuplicate: 2, core.Swallow: 2}},
		{"First: only retractions", core.First{}, core.Candidate{Retractions: 2}, false, rowkind.Insert,
			map[core.Outcome]int64{core.IgnoreRetraction: 2}},
		{"Last: final row inserted, the rest superseded", core.Last{}, core.Candidate{Has: true, Rows: 3, Retractions: 2}, true, rowkind.Insert,
			map[core.Outcome]int64{core.Inserted: 1, core.Superseded: 4}},
		{"Last: ends deleted, which it emits as a -D", core.Last{}, core.Candidate{Has: true, Retract: true, Rows: 1, Retractions: 2}, true, rowkind.Delete,
			map[core.Outcome]int64{core.DeletedIn: 1, core.Superseded: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.rules.Settle(tc.m)
			assert.Equal(t, tc.emit, s.Emit)
			assert.Equal(t, tc.kind, s.Kind)
			var total int64
			for o, n := range s.Counts {
				assert.Equal(t, tc.want[core.Outcome(o)], n, core.Outcome(o).String())
				total += n
			}
			assert.Equal(t, tc.m.Rows+tc.m.Retractions, total, "every row once")
		})
	}
}

// keyRow is one row of a key in the agreement test: its kind, its
// SequenceBy value, its time to the microsecond and its encoding (kind
// aside), which holds the columns the row's order is read from.
type keyRow struct {
	kind rowkind.Kind
	seq  []byte
	ms   int64
	us   uint16
	row  []byte
}

func (r keyRow) coreRow() core.Row {
	return core.Row{Kind: r.kind, Time: r.ms, Micros: r.us, Seq: r.seq, Row: r.row}
}

func (r keyRow) order() rowcol.Order { return r.coreRow().Order() }

func (r keyRow) String() string {
	return fmt.Sprintf("%v%x@%d.%03d:%s", r.kind, r.seq, r.ms, r.us, r.row)
}

// randomKey is a key's rows: at most 8, their times a few milliseconds and
// microseconds apart so that many tie, some equal rows, and with seqs a
// SequenceBy value too. The encoding holds the payload and the ordering
// columns, as a row's does (so equal rows are equal in order).
func randomKey(rng *rand.Rand, seqs bool, kinds []rowkind.Kind) []keyRow {
	var rows []keyRow
	for range 1 + rng.IntN(8) {
		r := keyRow{kind: kinds[rng.IntN(len(kinds))], ms: int64(rng.IntN(3)), us: uint16(rng.IntN(2) * 500)}
		if seqs {
			r.seq = []byte{byte(rng.IntN(3))}
		}
		r.row = fmt.Appendf(nil, "%c|%x|%d.%d", 'a'+rng.IntN(3), r.seq, r.ms, r.us)
		rows = append(rows, r)
	}
	return rows
}

// winner is the comparator's winner of rows arriving in this order, by its
// tie rule for a stream (replaces: core.Direction.Replaces): the row that
// each later row must replace to be kept.
func winner(rows []keyRow, replaces func(arriving, kept rowcol.Order) bool) keyRow {
	w := rows[0]
	for _, r := range rows[1:] {
		if replaces(r.order(), w.order()) {
			w = r
		}
	}
	return w
}

// merged merges rows' one-row candidates in a random tree order.
func merged(rng *rand.Rand, d core.Direction, rows []keyRow) core.Candidate {
	cands := make([]core.Candidate, len(rows))
	for i, r := range rows {
		cands[i] = d.One(r.coreRow())
	}
	for len(cands) > 1 {
		i := rng.IntN(len(cands) - 1)
		cands = slices.Replace(cands, i, i+2, d.Merge(cands[i], cands[i+1]))
	}
	return cands[0]
}

// sinkRow is a key's row in pgsink's table: the row and its order (a
// tombstone is a retraction).
type sinkRow struct {
	has   bool
	order rowcol.Order
	row   []byte
}

// toSink applies one row of KeepLast's changelog to the key's table row as
// pgsink does: a -U is skipped (the +U after it replaces the row), every
// other row is written when rowcol.Later says it replaces the stored one,
// a -D as a tombstone, with the order read from the row's own columns.
func toSink(t *sinkRow, kind rowkind.Kind, r keyRow) {
	if kind == rowkind.UpdateBefore {
		return
	}
	o := r.order()
	o.Retraction = kind == rowkind.Delete
	if !t.has || rowcol.Later(o, t.order) {
		*t = sinkRow{has: true, order: o, row: r.row}
	}
}

// The one comparator, row for row, on random keys with tied rows in every
// arrival order (every permutation of up to five rows): the row the stateful rules keep (First's finalized
// candidate, Last's stored row or tombstone) is the comparator's winner for
// that arrival, and so is the row of KeepLast's mini-batch fold and of
// KeepFirst's pre-filter; pgsink, applying KeepLast's changelog by its
// rules, ends with KeepLast's final state; the merge of the bounded and
// window expansions keeps a row of the same order, the one whose encoding
// stands in for arrival.
func TestOrder_StatefulRulesAndMergeKeepTheSameRow(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 4))
	all := []rowkind.Kind{rowkind.Insert, rowkind.UpdateAfter, rowkind.UpdateBefore, rowkind.Delete}
	for iter := range 1500 {
		seqs := rng.IntN(2) == 0
		first, last := randomKey(rng, false, []rowkind.Kind{rowkind.Insert}), randomKey(rng, seqs, all)
		for _, arrival := range arrivalOrders(rng, first) {
			want := winner(arrival, core.KeepFirst.Replaces)
			rules := core.First{Config: core.Config{EventTime: true}}
			var st core.State
			var p core.Passed
			for _, r := range arrival {
				if drop, _ := rules.PreFilterFirstRow(&p, r.coreRow(), 0); drop {
					continue // the pre-filter drops only what the state would
				}
				d := rules.OnRow(&st, core.Row{Kind: r.kind, Time: r.ms, Micros: r.us}, 0)
				if d.Stored {
					st.Cand = r.row
				}
			}
			assert.Equal(t, string(want.row), string(st.Cand), "iteration %d: %v", iter, arrival)
			assert.Equal(t, want.order(), rowcol.Order{Time: micros.Of(st.CandTime, st.Micros)})

			m := merged(rng, core.KeepFirst, arrival)
			require.True(t, m.Has)
			assert.Equal(t, want.order(), m.Order(), "iteration %d: the merge keeps a row of the winner's order", iter)
			smallest := slices.MinFunc(first, func(a, b keyRow) int { return rowcol.CompareRows(a.order(), a.row, b.order(), b.row) })
			assert.Equal(t, string(smallest.row), string(m.Row), "the merge: the smallest encoding of that order")
		}
		for _, arrival := range arrivalOrders(rng, last) {
			want := winner(arrival, core.KeepLast.Replaces)
			rules := core.Last{Config: core.Config{Ordered: true}}
			var st core.State
			var table sinkRow
			for _, r := range arrival {
				was := st
				d := rules.OnRow(&st, r.coreRow(), 0)
				for _, e := range d.Emissions() {
					emitted := r
					if e.Old { // the stored row, with its own columns
						emitted = keyRow{row: was.Cand, seq: was.Seq, ms: was.CandTime, us: was.Micros}
					}
					toSink(&table, e.Kind, emitted)
				}
			}
			if want.kind.IsRetraction() {
				assert.Empty(t, st.Cand, "iteration %d: the key ends deleted: %v", iter, arrival)
				assert.True(t, !table.has || table.order.Retraction, "iteration %d: the table holds no live row: %v", iter, arrival)
			} else {
				assert.Equal(t, string(want.row), string(st.Cand), "iteration %d: %v", iter, arrival)
				assert.Equal(t, string(want.row), string(table.row), "iteration %d: the table holds KeepLast's row: %v", iter, arrival)
				assert.False(t, table.order.Retraction)
			}
			assert.Equal(t, want.order(), rowcol.Order{Seq: st.Seq, Time: micros.Of(st.CandTime, st.Micros), Retraction: len(st.Cand) == 0},
				"iteration %d", iter)

			// The mini-batch fold passes on the winner alone, which leaves
			// the same state.
			var f core.Fold
			held := -1
			for i, r := range arrival {
				switch rules.FoldLastRow(&f, r.coreRow(), 0) {
				case core.FoldHold, core.FoldReplace:
					held = i
				}
			}
			var folded core.State
			rules.OnRow(&folded, arrival[held].coreRow(), 0)
			assert.True(t, st.Equal(&folded), "iteration %d: folded %v to %v", iter, arrival, arrival[held])

			m := merged(rng, core.KeepLast, arrival)
			require.True(t, m.Has)
			assert.Equal(t, want.order(), m.Order(), "iteration %d: the merge keeps a row of the winner's order", iter)
			largest := slices.MaxFunc(last, func(a, b keyRow) int { return rowcol.CompareRows(a.order(), a.row, b.order(), b.row) })
			assert.Equal(t, string(largest.row), string(m.Row), "the merge: the largest encoding of that order")
		}
	}
}

// arrivalOrders are the orders a key's rows are fed in: every one for up to
// five rows, else eight at random.
func arrivalOrders(rng *rand.Rand, rows []keyRow) [][]keyRow {
	if len(rows) > 5 {
		var out [][]keyRow
		for range 8 {
			a := slices.Clone(rows)
			rng.Shuffle(len(a), func(i, j int) { a[i], a[j] = a[j], a[i] })
			out = append(out, a)
		}
		return out
	}
	var out [][]keyRow
	var permute func(a []keyRow, k int)
	permute = func(a []keyRow, k int) {
		if k == len(a) {
			out = append(out, slices.Clone(a))
			return
		}
		for i := k; i < len(a); i++ {
			a[k], a[i] = a[i], a[k]
			permute(a, k+1)
			a[k], a[i] = a[i], a[k]
		}
	}
	permute(slices.Clone(rows), 0)
	return out
}

// A state written before times were kept to the microsecond (Micros 0:
// versions 1 and 2 of internal/statecoder) decides every row of its
// millisecond as it did then, when a millisecond tie went by arrival:
// KeepFirst keeps its candidate, KeepLast takes the row.
func TestOrder_AStateWithoutMicrosecondsDecidesItsMillisecondAsBefore(t *testing.T) {
	for us := range uint16(1000) {
		row := core.Row{Kind: rowkind.Insert, Time: 7, Micros: us, Row: []byte("new")}
		first := core.First{Config: core.Config{EventTime: true}}
		st := core.State{Phase: core.Pending, CandTime: 7, Cand: []byte("old")}
		assert.Equal(t, core.DropDuplicate, first.OnRow(&st, row, 0).Outcome, "%d µs", us)

		last := core.Last{Config: core.Config{Ordered: true}}
		st = core.State{Phase: core.Emitted, CandTime: 7, Cand: []byte("old")}
		assert.Equal(t, core.Updated, last.OnRow(&st, row, 0).Outcome, "%d µs", us)
		assert.Equal(t, us, st.Micros)
	}
}

// Event-time KeepFirst to the microsecond: a row earlier by microseconds
// within the candidate's millisecond replaces it, its finalization timer at
// the same millisecond; the candidate's microseconds are state
// (statecoder's version 4), dropped once it is emitted.
func TestFirst_AnEarlierRowInTheCandidatesMillisecondReplacesIt(t *testing.T) {
	first := core.First{Config: core.Config{EventTime: true}}
	var st core.State
	d := first.OnRow(&st, core.Row{Time: 7, Micros: 600, Row: []byte("a")}, 0)
	assert.Equal(t, core.BecomeCandidate, d.Outcome)
	assert.Equal(t, uint16(600), st.Micros)
	d = first.OnRow(&st, core.Row{Time: 7, Micros: 900, Row: []byte("b")}, 0)
	assert.Equal(t, core.DropDuplicate, d.Outcome)
	d = first.OnRow(&st, core.Row{Time: 7, Micros: 100, Row: []byte("c")}, 0)
	assert.Equal(t, core.ReplaceCandidate, d.Outcome)
	assert.Equal(t, core.Timer{Kind: core.Finalize, At: 7}, d.Timer)
	assert.Equal(t, core.State{Phase: core.Pending, CandTime: 7, Micros: 100, Cand: []byte("c")}, st)
	td := first.OnTimer(&st, true, 7, 0, 1000)
	assert.True(t, td.Emit)
	assert.Equal(t, core.State{Phase: core.Emitted, CandTime: 7}, st)
}

// Without an ordering column, bounded KeepLast orders a key's rows by their
// timestamps alone, where a changelog's -U comes before the +U of its
// update: a live row wins over a retraction of its timestamp, as before the
// comparator said otherwise for values.
func TestMerge_KeepLastWithoutAValueKeepsALiveRowOverARetractionOfItsTimestamp(t *testing.T) {
	ins := core.Candidate{Has: true, Stamped: true, TS: 5, Row: []byte("a"), Rows: 1}
	ret := core.Candidate{Has: true, Stamped: true, Retract: true, TS: 5, Row: []byte("z"), Retractions: 1}
	for _, m := range []core.Candidate{core.KeepLast.Merge(ins, ret), core.KeepLast.Merge(ret, ins)} {
		assert.False(t, m.Retract)
		assert.Equal(t, []byte("a"), m.Row)
	}
	later := core.Candidate{Has: true, Stamped: true, Retract: true, TS: 6, Row: []byte("0"), Retractions: 1}
	assert.True(t, core.KeepLast.Merge(ins, later).Retract, "a later retraction still wins")
}

package core_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/transforms/dedup/core"
	"github.com/beamdedup/beamdedup/transforms/rowkind"
)

func TestOrder_SequenceFirstThenTimeAndTiesGoByArrival(t *testing.T) {
	o := func(seq string, ts int64) core.Order { return core.Order{Seq: seqOrNil(seq), Time: ts} }
	for _, tc := range []struct {
		name       string
		a, b       core.Order
		cmp        int
		first, lst bool // KeepFirst / KeepLast: does a, arriving, replace b?
	}{
		{"earlier time", o("", 1), o("", 2), -1, true, false},
		{"later time", o("", 2), o("", 1), 1, false, true},
		{"tie", o("", 1), o("", 1), 0, false, true},
		{"sequence before time", o("b", 1), o("a", 9), 1, false, true},
		{"no sequence ranks first", o("", 9), o("a", 1), -1, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.cmp, tc.a.Compare(tc.b))
			assert.Equal(t, tc.first, core.KeepFirst.Replaces(tc.a, tc.b), "KeepFirst")
			assert.Equal(t, tc.lst, core.KeepLast.Replaces(tc.a, tc.b), "KeepLast")
		})
	}
}

func TestRank_ARetractionRanksBeforeAnInsertionOfTheSameInstant(t *testing.T) {
	ins := core.Rank{Order: core.Order{Time: 5}}
	ret := core.Rank{Order: core.Order{Time: 5}, Retraction: true}
	assert.Equal(t, -1, ret.Compare(ins))
	assert.Equal(t, 1, ins.Compare(ret))
	assert.Equal(t, 0, ret.Compare(ret))
	assert.Equal(t, 1, core.Rank{Order: core.Order{Time: 6}, Retraction: true}.Compare(ins), "the order comes first")
}

// The merge is what makes the bounded result repeatable: earliest timestamp,
// ties to the smaller encoding, in any order of merging.
func TestMerge_KeepFirstKeepsEarliestThenSmallestInAnyOrder(t *testing.T) {
	a := core.Candidate{Has: true, TS: 5, Row: []byte("b"), Rows: 1}
	b := core.Candidate{Has: true, TS: 5, Row: []byte("a"), Rows: 1}
	c := core.Candidate{Has: true, TS: 9, Row: []byte("0"), Rows: 1}
	r := core.Candidate{Retractions: 1}
	m := core.KeepFirst.Merge
	want := core.Candidate{Has: true, TS: 5, Row: []byte("a"), Rows: 3, Retractions: 1}
	assert.Equal(t, want, m(m(a, b), m(c, r)))
	assert.Equal(t, want, m(m(r, c), m(b, a)))
	assert.Equal(t, want, m(a, m(r, m(c, b))))
}

// With KeepLast the merge keeps the largest (seq, time, row), the sequence
// value before the time, and a +U beats the -U of its instant.
func TestMerge_KeepLastKeepsLargestSeqThenTimeThenRowInAnyOrder(t *testing.T) {
	a := core.Candidate{Has: true, TS: 9, Seq: []byte{1}, Row: []byte("z"), Rows: 1}
	b := core.Candidate{Has: true, TS: 1, Seq: []byte{2}, Row: []byte("a"), Rows: 1}
	c := core.Candidate{Has: true, TS: 1, Seq: []byte{2}, Row: []byte("b"), Rows: 1}
	r := core.Candidate{Has: true, Retract: true, TS: 1, Seq: []byte{2}, Row: []byte("c"), Retractions: 1}
	want := core.Candidate{Has: true, TS: 1, Seq: []byte{2}, Row: []byte("b"), Rows: 3, Retractions: 1}
	cands := []core.Candidate{a, b, c, r}
	m := core.KeepLast.Merge
	rng := rand.New(rand.NewPCG(5, 6))
	for range 20 {
		rng.Shuffle(len(cands), func(i, j int) { cands[i], cands[j] = cands[j], cands[i] })
		assert.Equal(t, want, m(m(cands[0], cands[1]), m(cands[2], cands[3])), "the +U beats the -U of the same instant; the larger row wins the tie")
		assert.Equal(t, want, m(cands[0], m(cands[1], m(cands[2], cands[3]))))
	}
	assert.Equal(t, a.Row, core.KeepFirst.Merge(core.KeepFirst.Merge(a, b), c).Row, "First: the smallest seq wins over an earlier time")
}

func TestSettle_AccountsForEveryMergedRowOnce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rules core.Rules
		m     core.Candidate
		emit  bool
		want  map[core.Outcome]int64
	}{
		{"First: kept row, duplicates, swallowed", core.First{}, core.Candidate{Has: true, Rows: 3, Retractions: 2}, true,
			map[core.Outcome]int64{core.Emit: 1, core.DropDuplicate: 2, core.Swallow: 2}},
		{"First: only retractions", core.First{}, core.Candidate{Retractions: 2}, false,
			map[core.Outcome]int64{core.IgnoreRetraction: 2}},
		{"Last: final row inserted, the rest superseded", core.Last{}, core.Candidate{Has: true, Rows: 3, Retractions: 2}, true,
			map[core.Outcome]int64{core.Inserted: 1, core.Superseded: 4}},
		{"Last: ends deleted", core.Last{}, core.Candidate{Has: true, Retract: true, Rows: 1, Retractions: 2}, false,
			map[core.Outcome]int64{core.IgnoreRetraction: 1, core.Superseded: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.rules.Settle(tc.m)
			assert.Equal(t, tc.emit, s.Emit)
			var total int64
			for o, n := range s.Counts {
				assert.Equal(t, tc.want[core.Outcome(o)], n, core.Outcome(o).String())
				total += n
			}
			assert.Equal(t, tc.m.Rows+tc.m.Retractions, total, "every row once")
		})
	}
}

// mergedRow is one row of a key in the agreement test.
type mergedRow struct {
	kind rowkind.Kind
	seq  []byte
	time int64
	row  []byte // its encoding, kind aside
}

func (r mergedRow) rank() core.Rank {
	return core.Rank{Order: core.Order{Seq: r.seq, Time: r.time}, Retraction: r.kind.IsRetraction()}
}

// inArrivalOrder returns rows in a random arrival order in which rows tied
// on their order arrive in the merge's stand-in order (a retraction before
// an insertion, then the smaller encoding first): the arrival a merge
// assumes.
func inArrivalOrder(rng *rand.Rand, rows []mergedRow) []mergedRow {
	out := slices.Clone(rows)
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	// Positions of each tie group, refilled with the group sorted.
	groups := map[string][]int{}
	for i, r := range out {
		k := fmt.Sprintf("%x/%d", r.seq, r.time)
		groups[k] = append(groups[k], i)
	}
	for _, pos := range groups {
		tied := make([]mergedRow, len(pos))
		for i, p := range pos {
			tied[i] = out[p]
		}
		slices.SortStableFunc(tied, func(a, b mergedRow) int {
			if c := a.rank().Compare(b.rank()); c != 0 {
				return c
			}
			return bytes.Compare(a.row, b.row)
		})
		for i, p := range pos {
			out[p] = tied[i]
		}
	}
	return out
}

// merged merges rows' one-row candidates in a random tree order.
func merged(rng *rand.Rand, d core.Direction, rows []mergedRow) core.Candidate {
	cands := make([]core.Candidate, len(rows))
	for i, r := range rows {
		cands[i] = d.One(r.time, r.seq, r.kind.IsRetraction(), r.row)
	}
	for len(cands) > 1 {
		i := rng.IntN(len(cands) - 1)
		cands = slices.Replace(cands, i, i+2, d.Merge(cands[i], cands[i+1]))
	}
	return cands[0]
}

// The one ordering, row for row: on random keys, the row the stateful rules
// keep (First's finalized candidate, Last's stored row or tombstone) is the
// row the merge of the bounded and window expansions keeps, when rows tied
// on their order arrive in the merge's stand-in order.
func TestOrder_StatefulRulesAndMergeKeepTheSameRow(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 4))
	kinds := []rowkind.Kind{rowkind.Insert, rowkind.UpdateAfter, rowkind.UpdateBefore, rowkind.Delete}
	for iter := range 3000 {
		seqs := rng.IntN(2) == 0
		var rows []mergedRow
		for range 1 + rng.IntN(8) {
			r := mergedRow{kind: kinds[rng.IntN(len(kinds))], time: int64(rng.IntN(4)), row: []byte{byte('a' + rng.IntN(3))}}
			if seqs {
				r.seq = []byte{byte(rng.IntN(3))}
			}
			rows = append(rows, r)
		}
		t.Run("KeepFirst", func(t *testing.T) {
			// KeepFirst in a stream: event time, insert-only input.
			var inserts []mergedRow
			for _, r := range rows {
				if !r.kind.IsRetraction() {
					r.seq = nil
					inserts = append(inserts, r)
				}
			}
			if len(inserts) == 0 {
				return
			}
			first := core.First{Config: core.Config{EventTime: true}}
			var st core.State
			for _, r := range inArrivalOrder(rng, inserts) {
				d := first.OnRow(&st, core.Row{Kind: r.kind, Time: r.time}, 0)
				if d.Stored {
					st.Cand = r.row
				}
			}
			m := merged(rng, core.KeepFirst, inserts)
			require.True(t, m.Has)
			assert.Equal(t, string(m.Row), string(st.Cand), "iteration %d: %v", iter, inserts)
			assert.Equal(t, m.TS, st.CandTime)
		})

		t.Run("KeepLast", func(t *testing.T) {
			last := core.Last{Config: core.Config{Ordered: true}}
			arrival := inArrivalOrder(rng, rows)
			var st core.State
			for _, r := range arrival {
				last.OnRow(&st, core.Row{Kind: r.kind, Time: r.time, Seq: r.seq, Row: r.row}, 0)
			}
			m := merged(rng, core.KeepLast, rows)
			require.True(t, m.Has)
			if m.Retract {
				assert.Empty(t, st.Cand, "iteration %d: the key ends deleted: %v", iter, arrival)
			} else {
				assert.Equal(t, string(m.Row), string(st.Cand), "iteration %d: %v", iter, arrival)
			}
			assert.Equal(t, core.Order{Seq: m.Seq, Time: m.TS}, core.Order{Seq: st.Seq, Time: st.CandTime}, "iteration %d", iter)
		})
	}
}

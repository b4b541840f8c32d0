package core_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/transforms/dedup/internal/core"
	"github.com/beamdedup/beamdedup/transforms/rowkind"
)

// Rule 6, the mini-batch fold: which row of a key's bundle it passes on.

type foldIn struct {
	kind rowkind.Kind
	et   int64
	seq  string
	now  int64
	want core.FoldAction
}

// Within a millisecond the fold compares microseconds, as the state does.
func TestFold_OrdersRowsOfOneMillisecondToTheMicrosecond(t *testing.T) {
	cfg := core.Config{Ordered: true}
	var p core.Fold
	for i, r := range []struct {
		us   uint16
		want core.FoldAction
	}{{700, core.FoldHold}, {200, core.FoldDrop}, {700, core.FoldReplace}, {701, core.FoldReplace}, {0, core.FoldDrop}} {
		assert.Equal(t, r.want, cfg.FoldLastRow(&p, core.Row{Kind: rowkind.Insert, Time: 5, Micros: r.us}, 0), "row %d", i)
	}
}

func TestFold_EachRowOfABundleHoldsReplacesDropsOrFlushes(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  core.Config
		rows []foldIn
	}{
		{"arrival order: the last row replaces, whatever its time, kind or arrival without StateTTL", core.Config{}, []foldIn{
			{rowkind.Insert, 5, "", 0, core.FoldHold},
			{rowkind.Insert, 1, "", 0, core.FoldReplace},
			{rowkind.Delete, 0, "", 60 * minute, core.FoldReplace},
			{rowkind.UpdateAfter, 0, "", 600 * minute, core.FoldReplace},
		}},
		{"ordered: a row below the pending one drops, a tie replaces", core.Config{Ordered: true}, []foldIn{
			{rowkind.Insert, 5, "", 0, core.FoldHold},
			{rowkind.Insert, 4, "", 0, core.FoldDrop},
			{rowkind.UpdateAfter, 5, "", 0, core.FoldReplace},
			{rowkind.UpdateBefore, 5, "", 0, core.FoldReplace},
			{rowkind.UpdateAfter, 5, "", 0, core.FoldDrop}, // as old as a retraction
			{rowkind.Delete, 5, "", 0, core.FoldReplace},
			{rowkind.Delete, 3, "", 0, core.FoldDrop},
		}},
		{"sequence value before the time", core.Config{Ordered: true}, []foldIn{
			{rowkind.Insert, 5, "b", 0, core.FoldHold},
			{rowkind.Insert, 9, "a", 0, core.FoldDrop},
			{rowkind.Insert, 1, "c", 0, core.FoldReplace},
		}},
		{"StateTTL: a group lasts TTL/RefreshFraction", core.Config{StateTTL: 100 * minute, Ordered: true}, []foldIn{
			{rowkind.Insert, 5, "", 0, core.FoldHold},
			{rowkind.Insert, 6, "", minute - 1, core.FoldReplace},
			{rowkind.Insert, 4, "", minute - 1, core.FoldDrop},
			{rowkind.Insert, 1, "", minute, core.FoldFlush}, // even below: a new group
			{rowkind.Insert, 2, "", 2*minute - 1, core.FoldReplace},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p core.Fold
			for i, r := range tc.rows {
				got := tc.cfg.FoldLastRow(&p, core.Row{Kind: r.kind, Time: r.et, Seq: seqOrNil(r.seq)}, r.now)
				assert.Equal(t, r.want, got, "row %d", i)
			}
		})
	}
}

func seqOrNil(s string) []byte {
	if s == "" {
		return nil
	}
	return []byte(s)
}

// folded runs rows through the fold as the keying step does: it returns the
// rows passed on, in order, and how many were superseded.
func folded(cfg core.Config, rows []core.Row, nows []int64) (out []core.Row, superseded int) {
	var p core.Fold
	var pending core.Row
	for i, r := range rows {
		switch cfg.FoldLastRow(&p, r, nows[i]) {
		case core.FoldReplace:
			superseded++
			pending = r
		case core.FoldDrop:
			superseded++
		case core.FoldFlush:
			out = append(out, pending)
			pending = r
		case core.FoldHold:
			pending = r
		}
	}
	if p.Has {
		out = append(out, pending)
	}
	return out, superseded
}

// The fold against Last.OnRow: for random prior states and random bundles,
// the folded rows leave the key's state and what downstream holds (the
// changelog applied to a map) as the unfolded rows do, every row is either
// passed on or superseded, and one row is passed on. Without a StateTTL the
// bundle is one group; where a StateTTL splits it (FoldFlush) is the table
// test's and TestKeepLast_MiniBatchWithStateTTLFoldsOnlyWithinTTLOver100's.
func TestFold_FoldedBundleLeavesTheSameStateAsTheUnfoldedOne(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 10))
	kinds := []rowkind.Kind{rowkind.Insert, rowkind.UpdateAfter, rowkind.UpdateAfter, rowkind.UpdateBefore, rowkind.Delete}
	for iter := range 5000 {
		cfg := core.Config{Ordered: rng.IntN(2) == 0, Upsert: rng.IntN(4) == 0, ResetOnDuplicate: rng.IntN(2) == 0}
		seqs := cfg.Ordered && rng.IntN(2) == 0
		row := func() core.Row {
			et := int64(rng.IntN(6))
			r := core.Row{Kind: kinds[rng.IntN(len(kinds))], Time: et}
			var seq string
			if seqs {
				seq = string(rune('a' + rng.IntN(4)))
				r.Seq = []byte(seq)
			}
			// A row's value is one of a few, so duplicates happen; with
			// OnTime it carries its event time (a column), with SequenceBy
			// its sequence value only, so equal rows may differ in time.
			r.Row = fmt.Appendf(nil, "v%d@%s", rng.IntN(2), seq)
			if !seqs {
				r.Row = fmt.Appendf(r.Row, "%d", et)
			}
			return r
		}
		// The key's prior state: what earlier bundles left.
		var st core.State
		held := map[string]bool{} // downstream: the rows the changelog left
		apply := func(d core.Decision, old, arriving []byte) {
			for _, e := range d.Emissions() {
				r := arriving
				if e.Old {
					r = old
				}
				if e.Kind.IsRetraction() {
					delete(held, string(r))
				} else {
					if e.Kind == rowkind.UpdateAfter && cfg.Upsert {
						clear(held) // an upsert replaces the key's row
					}
					held[string(r)] = true
				}
			}
		}
		for range rng.IntN(3) {
			r := row()
			old := st.Cand
			apply(core.Last{Config: cfg}.OnRow(&st, r, 0), old, r.Row)
		}
		bundle := make([]core.Row, 1+rng.IntN(6))
		nows := make([]int64, len(bundle))
		for i := range bundle {
			bundle[i] = row()
		}
		stA, stB := st, st
		heldA, heldB := held, map[string]bool{}
		for k := range held {
			heldB[k] = true
		}
		run := func(st *core.State, h map[string]bool, rows []core.Row) {
			held = h
			for _, r := range rows {
				old := st.Cand
				apply(core.Last{Config: cfg}.OnRow(st, r, 0), old, r.Row)
			}
		}
		run(&stA, heldA, bundle)
		fold, superseded := folded(cfg, bundle, nows)
		require.Len(t, fold, 1, "one group, one row")
		require.Equal(t, len(bundle), len(fold)+superseded, "every row counted once")
		run(&stB, heldB, fold)
		require.Equal(t, stA, stB, "iteration %d %+v: state after\n%q\nfolded to\n%q", iter, cfg, bundle, fold)
		require.Equal(t, heldA, heldB, "iteration %d %+v: downstream after\n%q\nfolded to\n%q", iter, cfg, bundle, fold)
	}
}

// KeepFirst's pre-filter drops only what the state would drop: a later row
// of a key passed on in the bundle (a duplicate, or swallowed if a
// retraction), never an earlier event time (it may become the candidate),
// never a retraction of a key not passed on, and with StateTTL only within
// TTL/100 of the key's first row passed on.
func TestPreFilterFirstRow_DropsOnlyRowsTheStateWouldDrop(t *testing.T) {
	type in struct {
		kind rowkind.Kind
		et   int64
		now  int64
		drop bool
		o    core.Outcome
	}
	for _, tc := range []struct {
		name string
		cfg  core.Config
		rows []in
	}{
		{"watermarkless", core.Config{}, []in{
			{rowkind.UpdateBefore, 1, 0, false, 0}, // not passed on: it must reach the state
			{rowkind.Insert, 5, 0, false, 0},
			{rowkind.Insert, 1, 0, true, core.DropDuplicate},
			{rowkind.Delete, 1, 0, true, core.Swallow},
		}},
		{"event time", core.Config{EventTime: true}, []in{
			{rowkind.Insert, 5, 0, false, 0},
			{rowkind.Insert, 5, 0, true, core.DropDuplicate}, // a tie keeps the first arrival
			{rowkind.Insert, 4, 0, false, 0},                 // earlier: may become the candidate
			{rowkind.Insert, 5, 0, true, core.DropDuplicate},
		}},
		{"StateTTL: within TTL/100 only", core.Config{StateTTL: 100 * minute}, []in{
			{rowkind.Insert, 1, 0, false, 0},
			{rowkind.Insert, 1, minute - 1, true, core.DropDuplicate},
			{rowkind.Insert, 1, minute, false, 0}, // a new group: it may refresh or start a period
			{rowkind.Insert, 1, 2*minute - 1, true, core.DropDuplicate},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p core.Passed
			for i, r := range tc.rows {
				drop, o := tc.cfg.PreFilterFirstRow(&p, core.Row{Kind: r.kind, Time: r.et}, r.now)
				assert.Equal(t, r.drop, drop, "row %d", i)
				if drop {
					assert.Equal(t, r.o, o, "row %d", i)
				}
			}
		})
	}
}

package bench_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/testing/bench"
)

func TestWorkload_EveryRepeatIsAKeepLastUpdateWithoutResends(t *testing.T) {
	for _, w := range gridWorkloads(2000) {
		t.Run(workloadName(w), func(t *testing.T) {
			rows, keys := int64(w.Rows), int64(w.Keys)
			for _, onTime := range []bool{false, true} {
				c := bench.KeepLast(w.ByEventTime(), onTime)
				assert.Equal(t, bench.LastCount{Inserts: keys, Updates: rows - keys}, c, "onTime %v", onTime)
				assert.Equal(t, 2*rows-keys, c.Changelog())
				assert.Equal(t, rows, c.Upsert())
			}
			assert.Equal(t, bench.LastCount{Inserts: keys, Updates: rows - keys}, bench.KeepLast(w.All(), false), "arrival order")
		})
	}
}

func TestWorkload_ResendsAreCopiesOfTheKeysPreviousRow(t *testing.T) {
	w := bench.Workload{Rows: 2000, Keys: 200, Seed: 7, Resends: true}
	prev := map[string]bench.Row{}
	var resends int64
	for r := range w.All() {
		if p, ok := prev[r.Key]; ok && r.Seq == p.Seq {
			require.Equal(t, p, r, "a row with its key's previous Seq is a whole copy")
			resends++
		}
		prev[r.Key] = r
	}
	assert.Len(t, prev, w.Keys, "exactly Keys keys")
	assert.Equal(t, w.Rows, len(slices.Collect(w.All())))
	assert.InDelta(t, 0.5, float64(resends)/float64(w.Rows-w.Keys), 0.05, "about half the repeats are resends")

	keys := int64(w.Keys)
	// A resend follows its original in arrival order and sorts next to it
	// by event time (same TS), so both orders count it as a duplicate.
	for name, rows := range map[string]func() bench.LastCount{
		"arrival":    func() bench.LastCount { return bench.KeepLast(w.All(), false) },
		"event time": func() bench.LastCount { return bench.KeepLast(w.ByEventTime(), false) },
	} {
		c := rows()
		assert.Equal(t, bench.LastCount{Inserts: keys, Updates: int64(w.Rows) - keys - resends, Duplicates: resends}, c, name)
	}
}

func TestWorkload_KeepLastOnTimeDropsRowsOlderThanTheStoredOne(t *testing.T) {
	w := bench.Workload{Rows: 2000, Keys: 200, Seed: 7}
	c := bench.KeepLast(w.All(), true)
	assert.Positive(t, c.OutOfOrder, "arrival order: the generator's jitter puts older rows after newer ones")
	assert.Equal(t, int64(w.Rows), c.Inserts+c.Updates+c.Duplicates+c.OutOfOrder, "every row counted once")
	assert.Zero(t, bench.KeepLast(w.ByEventTime(), true).OutOfOrder, "in event-time order no row is older than the stored one")
}

func TestWorkload_WithoutResendsTheRowsAreUnchanged(t *testing.T) {
	// The grid's workloads predate Resends, and their measurements in the
	// docs hold for these rows: Resends must draw nothing when it is off.
	w := bench.Workload{Rows: 5, Keys: 3, Seed: 42}
	want := []bench.Row{
		{Key: "user-0", Op: "+I", TS: 1704067199683, Seq: 0},
		{Key: "user-1", Op: "+I", TS: 1704067190042, Seq: 1},
		{Key: "user-1", Op: "+U", TS: 1704067191585, Seq: 2},
		{Key: "user-2", Op: "+I", TS: 1704067190876, Seq: 3},
		{Key: "user-1", Op: "+U", TS: 1704067197649, Seq: 4},
	}
	assert.Equal(t, want, slices.Collect(w.All()))
}

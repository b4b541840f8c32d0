package dedup_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/stretchr/testify/assert"

	"github.com/beamdedup/beamdedup/testing/deduptest"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/rowkind"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// The combine expansion (bounded input) and the stateful one must agree
// wherever the spec defines the result: the earliest event time per key in
// event-time mode (distinct times), exact duplicates, and a changelog whose
// +I/+U rows of a key carry one payload. Each case runs both expansions on
// the same randomized input and compares them with each other and with the
// expected rows computed here.
func TestExpansions_CombineAndStatefulAgreeWhereTheSpecDefinesTheResult(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	base := at(10, 0)

	timed, wantTimed := randomTimedEvents(rng, base, 400, 26)
	trades, wantTrades := randomTrades(rng, 400, 3)

	var changes []any
	seen := map[string]bool{}
	kinds := []string{"+I", "-U", "+U", "-D"}
	for range 400 {
		user := string(rune('a' + rng.IntN(20)))
		op := kinds[rng.IntN(4)]
		ev := "first-" + user // one +I/+U payload per key
		if op == "-U" || op == "-D" {
			ev = "old"
		} else {
			seen[user] = true
		}
		changes = append(changes, changeRow{op, user, ev})
	}
	var wantChanges []any
	for user := range seen {
		wantChanges = append(wantChanges, changeRow{rowkind.Insert.String(), user, "first-" + user})
	}

	for _, tc := range []struct {
		name string
		rows []any
		opts []dedup.Option
		want []any
	}{
		{"event time, distinct times", timed, []dedup.Option{rowspec.PartitionBy("user_id"), rowspec.OnTime("rowtime")}, wantTimed},
		{"exact duplicates", trades, []dedup.Option{dedup.PartitionByAll()}, wantTrades},
		{"changelog, one payload per key", changes, []dedup.Option{rowspec.PartitionBy("user_name"), rowspec.KindColumn("op")}, wantChanges},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, s := beam.NewPipelineWithRoot()
			in := beam.Create(s, tc.rows...)
			combined := dedup.KeepFirst(s.Scope("combine"), in, tc.opts...).Rows
			stateful := dedup.KeepFirst(s.Scope("stateful"), in, append(tc.opts, dedup.AsStream())...).Rows
			passert.Equals(s, combined, tc.want...)
			passert.Equals(s, stateful, tc.want...)
			c := run(t, p)
			assert.Equal(t, int64(2*len(tc.rows)), c.RowsIn)
			assert.Equal(t, int64(2*len(tc.want)), c.Emitted)
			assert.Zero(t, c.Pending())
		})
	}
}

// On bounded input the keying step merges each key's rows within the bundle
// (MiniBatch); the combine expansion gives the same rows and the same
// counts without it. Rows of a key tie on time (beam.Create), so the
// encoding tie-break decides, and retractions test the counting.
func TestMiniBatch_BoundedSameRowsAndCountsWithAndWithoutInBundleMerge(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 8))
	var rows []any
	for range 600 {
		op := []string{"+I", "+U", "-U", "-D"}[rng.IntN(4)]
		rows = append(rows, changeRow{op, string(rune('a' + rng.IntN(40))), fmt.Sprint(rng.IntN(6))})
	}
	opts := []dedup.Option{rowspec.PartitionBy("user_name"), rowspec.KindColumn("op")}
	counts := map[bool]dedup.Counters{}
	for _, on := range []bool{true, false} {
		p, s := beam.NewPipelineWithRoot()
		dedup.KeepFirst(s, beam.Create(s, rows...), append(opts, dedup.MiniBatch(on))...)
		counts[on] = deduptest.RowCounts(run(t, p))
	}
	p, s := beam.NewPipelineWithRoot()
	in := beam.Create(s, rows...)
	with, without := withAndWithoutMiniBatch(s, in, opts...)
	passert.Equals(s, with, without)
	run(t, p)
	assert.Equal(t, counts[false], counts[true])
	assert.Equal(t, int64(len(rows)), counts[true].RowsIn)
	assert.Positive(t, counts[true].ChangelogSwallowed)
	assert.Positive(t, counts[true].DuplicatesDropped)
	assert.Zero(t, counts[true].Pending())
}

// The mini-batch pre-filter changes costs, not results: on randomized
// inputs the stateful expansion gives the same output with and without it,
// and every row is still accounted for.
func TestMiniBatch_SameOutputWithAndWithoutThePreFilter(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	trades, want := randomTrades(rng, 500, 4)
	for _, tc := range []struct {
		name string
		opts []dedup.Option
	}{
		{"no TTL", nil},
		{"StateTTL with refresh", []dedup.Option{dedup.StateTTL(time.Hour)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, s := beam.NewPipelineWithRoot()
			in := beam.Create(s, trades...)
			opts := append([]dedup.Option{dedup.PartitionByAll(), dedup.AsStream()}, tc.opts...)
			with, without := withAndWithoutMiniBatch(s, in, opts...)
			passert.Equals(s, with, want...)
			passert.Equals(s, without, want...)
			c := run(t, p)
			assert.Equal(t, int64(2*len(want)), c.Emitted)
			assert.Equal(t, int64(2*(len(trades)-len(want))), c.DuplicatesDropped)
			assert.Positive(t, c.MiniBatchDropped, "the pre-filter dropped in-bundle duplicates")
			assert.Zero(t, c.Pending())
		})
	}
}

// In event-time mode the pre-filter passes a row only if it is earlier than
// every row of its key passed on in the bundle; the earliest row per key
// still wins, with and without it.
func TestMiniBatch_EventTimeKeepsTheEarliestRowWithAndWithoutThePreFilter(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 4))
	rows, want := randomTimedEvents(rng, at(10, 0), 600, 30)
	p, s := beam.NewPipelineWithRoot()
	in := beam.Create(s, rows...)
	opts := []dedup.Option{rowspec.PartitionBy("user_id"), rowspec.OnTime("rowtime"), dedup.AsStream()}
	with, without := withAndWithoutMiniBatch(s, in, opts...)
	passert.Equals(s, with, want...)
	passert.Equals(s, without, want...)
	c := run(t, p)
	assert.Equal(t, int64(2*len(want)), c.Emitted)
	assert.Positive(t, c.MiniBatchDropped)
	assert.Zero(t, c.Pending())
}

// randomTimedEvents returns n events of up to users users at distinct
// times from base on, and the earliest event of each user.
func randomTimedEvents(rng *rand.Rand, base time.Time, n, users int) (rows, earliestPerUser []any) {
	earliest := map[string]timedEvent{}
	for i, sec := range rng.Perm(n) {
		e := timedEvent{UserID: string(rune('a' + rng.IntN(users))), Event: fmt.Sprint(i), Rowtime: base.Add(time.Duration(sec) * time.Second)}
		rows = append(rows, e)
		if cur, ok := earliest[e.UserID]; !ok || e.Rowtime.Before(cur.Rowtime) {
			earliest[e.UserID] = e
		}
	}
	for _, e := range earliest {
		earliestPerUser = append(earliestPerUser, e)
	}
	return rows, earliestPerUser
}

// randomTrades returns n trades drawn from 10 ids and quantities
// quantities, many of them exact duplicates, and the distinct ones.
func randomTrades(rng *rand.Rand, n int, quantities int64) (rows, distinct []any) {
	seen := map[trade]bool{}
	for range n {
		tr := trade{"t" + string(rune('0'+rng.IntN(10))), "AAPL", rng.Int64N(quantities), 10}
		rows = append(rows, tr)
		if !seen[tr] {
			seen[tr] = true
			distinct = append(distinct, tr)
		}
	}
	return rows, distinct
}

// withAndWithoutMiniBatch applies KeepFirst with opts to in twice: with the
// mini-batch pre-filter and without it.
func withAndWithoutMiniBatch(s beam.Scope, in beam.PCollection, opts ...dedup.Option) (with, without beam.PCollection) {
	with = dedup.KeepFirst(s.Scope("with"), in, slices.Concat(opts, []dedup.Option{dedup.MiniBatch(true)})...).Rows
	without = dedup.KeepFirst(s.Scope("without"), in, slices.Concat(opts, []dedup.Option{dedup.MiniBatch(false)})...).Rows
	return with, without
}

// The one ordering, through the three expansions that keep a key's first
// or last row: the stateful step, the merge of bounded input and window
// dedup's combine keep the same row per key on random rows (event times
// distinct, so that the stateful step's arrival order decides nothing), and
// the merge and the window combine agree where times tie too (both break a
// tie by the encoded row).
func TestExpansions_StatefulMergeAndWindowKeepTheSameRowPerKey(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 8))
	distinct, earliest := randomTimedEvents(rng, at(10, 0), 300, 20)
	var tied []any
	for i := range 300 {
		tied = append(tied, timedEvent{UserID: string(rune('a' + rng.IntN(20))), Event: fmt.Sprint(i), Rowtime: at(10, rng.IntN(3))})
	}
	day := window.NewFixedWindows(24 * time.Hour) // one window holds every row
	opts := []dedup.Option{rowspec.PartitionBy("user_id"), rowspec.OnTime("rowtime")}

	p, s := beam.NewPipelineWithRoot()
	in := beam.Create(s, distinct...)
	passert.Equals(s, dedup.KeepFirst(s.Scope("stateful"), in, append(opts, dedup.AsStream())...).Rows, earliest...)
	passert.Equals(s, dedup.KeepFirst(s.Scope("merge"), in, opts...).Rows, earliest...)
	passert.Equals(s, global(s, dedup.WindowFirst(s.Scope("window"), beam.WindowInto(s, day, in), opts...).Rows), earliest...)

	ties := beam.Create(s.Scope("ties"), tied...)
	first := dedup.KeepFirst(s.Scope("merge-first"), ties, opts...).Rows
	passert.Equals(s, global(s, dedup.WindowFirst(s.Scope("window-first"), beam.WindowInto(s, day, ties), opts...).Rows), first)
	last := dedup.KeepLast(s.Scope("merge-last"), ties, append(opts, rowspec.Upsert())...).Rows
	passert.Equals(s, global(s, dedup.WindowLast(s.Scope("window-last"), beam.WindowInto(s, day, ties), opts...).Rows), last)
	run(t, p)
}

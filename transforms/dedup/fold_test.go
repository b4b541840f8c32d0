package dedup_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/teststream"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/stats"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/testing/deduptest"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// KeepLast's mini-batch fold (docs/keeplast.md, rule 7) on Prism: each TestStream
// AddElements batch is a bundle of the keying step.

// streamRow is a changelog row of the differential: Arr is its arrival
// (its element time, in stream order), TS its event time (OnTime) and Seq
// its SequenceBy value, both distinct per key and out of arrival order.
type streamRow struct {
	Op  string    `beam:"op"`
	ID  string    `beam:"id"`
	Val string    `beam:"val"`
	TS  time.Time `beam:"ts"`
	Seq int64     `beam:"seq"`
	Arr int64     `beam:"arr"`
}

func init() {
	beam.RegisterType(reflectType[streamRow]())
	register.Function2x0(stampArrival)
	register.Emitter2[beam.EventTime, streamRow]()
	register.Function2x0(netStreamChange)
}

// stampArrival sets a row's element time to its arrival.
func stampArrival(r streamRow, emit func(beam.EventTime, streamRow)) {
	emit(beam.EventTime(r.Arr), r)
}

func (r streamRow) String() string {
	return fmt.Sprintf("%s/%s#%d@%d", r.ID, r.Val, r.Seq, r.TS.UnixMilli())
}

// netStreamChange is netChange for streamRow.
func netStreamChange(r streamRow, emit func(string, int)) {
	d := 1
	if r.Op == "-U" || r.Op == "-D" {
		d = -1
	}
	emit(r.String(), d)
}

// batches streams rows in AddElements batches of the given sizes, the
// watermark after each at its last arrival.
func batches(t *testing.T, s beam.Scope, rows []streamRow, sizes []int) beam.PCollection {
	t.Helper()
	ts := teststream.NewConfig()
	for _, n := range sizes {
		b := make([]any, n)
		for i := range b {
			b[i] = rows[i]
		}
		require.NoError(t, ts.AddElements(rows[0].Arr, b...))
		require.NoError(t, ts.AdvanceWatermark(rows[n-1].Arr))
		rows = rows[n:]
	}
	require.Empty(t, rows)
	require.NoError(t, ts.AdvanceWatermarkToInfinity())
	return beam.ParDo(s, stampArrival, teststream.Create(s, ts))
}

func srow(op, id, val string, arr int64) streamRow {
	return streamRow{Op: op, ID: id, Val: val, TS: at(10, 0), Seq: arr, Arr: arr}
}

// Two bundles: o1 created/paid, then shipped/delivered; o2 is deleted and
// re-inserted inside the second. With MiniBatch the stateful step sees one
// row per key per bundle: one +I, then one -U/+U pair per key, and the
// folded rows are superseded; without, every version is emitted.
func TestKeepLast_MiniBatchFoldsEachBundleToOneChangePerKey(t *testing.T) {
	rows := []streamRow{
		srow("+I", "o1", "created", 1), srow("+U", "o1", "paid", 2), srow("+I", "o2", "x", 3),
		srow("+U", "o1", "shipped", 4), srow("-D", "o2", "x", 5), srow("+U", "o1", "delivered", 6), srow("+I", "o2", "y", 7),
	}
	for _, tc := range []struct {
		name string
		mb   bool
		want []string
		c    dedup.LastCounters
	}{
		{"folded", true, []string{"+I o1/paid", "+I o2/x", "-U o1/paid", "+U o1/delivered", "-U o2/x", "+U o2/y"},
			dedup.LastCounters{RowsIn: 7, Inserts: 2, Updates: 2, Superseded: 3, EmittedUpdateBefore: 2, EmittedUpdateAfter: 2}},
		{"MiniBatch(false)", false, []string{"+I o1/created", "-U o1/created", "+U o1/paid", "+I o2/x",
			"-U o1/paid", "+U o1/shipped", "-D o2/x", "-U o1/shipped", "+U o1/delivered", "+I o2/y"},
			dedup.LastCounters{RowsIn: 7, Inserts: 3, Updates: 3, DeletesIn: 1, EmittedUpdateBefore: 3, EmittedUpdateAfter: 3, EmittedDelete: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, s := beam.NewPipelineWithRoot()
			out := dedup.KeepLast(s, batches(t, s, rows, []int{3, 4}), rowspec.PartitionBy("id"), rowspec.KindColumn("op"), dedup.MiniBatch(tc.mb)).Rows
			passert.Equals(s, beam.ParDo(s, formatStreamChange, out), toAny(tc.want)...)
			c := runLast(t, p)
			assert.Equal(t, tc.c, deduptest.LastRowCounts(c))
			assert.Equal(t, tc.c.Superseded, c.MiniBatchDropped)
			assert.Zero(t, c.Unaccounted())
		})
	}
}

// With StateTTL a key's rows fold only while they arrive within TTL/100 of
// the first of them (the clock reads the arrival): with a 100-minute TTL, a
// and b (30 s apart) fold, c (2 min after a) passes b on and starts a new
// group, so the stateful step sees b then c.
func TestKeepLast_MiniBatchWithStateTTLFoldsOnlyWithinTTLOver100(t *testing.T) {
	t0 := ms(at(10, 0))
	rows := []streamRow{srow("", "o1", "a", t0), srow("", "o1", "b", t0+30_000), srow("", "o1", "c", t0+120_000)}
	p, s := beam.NewPipelineWithRoot()
	out := dedup.KeepLast(s, batches(t, s, rows, []int{3}), rowspec.PartitionBy("id"), rowspec.KindColumn("op"),
		dedup.StateTTL(100*time.Minute), deduptest.UseClock("rowtime"), dedup.CleanupTimers(false)).Rows
	passert.Equals(s, beam.ParDo(s, formatStreamChange, out), "+I o1/b", "-U o1/b", "+U o1/c")
	c := runLast(t, p)
	assert.Equal(t, dedup.LastCounters{RowsIn: 3, Inserts: 1, Updates: 1, Superseded: 1, EmittedUpdateBefore: 1, EmittedUpdateAfter: 1}, deduptest.LastRowCounts(c))
}

// Windowed input is not folded: rows held to the bundle's end would be
// emitted from FinishBundle, in the global window. Every version of a key
// in its window comes out, in one bundle too.
func TestKeepLast_MiniBatchDoesNotFoldWindowedInput(t *testing.T) {
	t0 := ms(at(10, 0))
	rows := []streamRow{srow("", "o1", "a", t0), srow("", "o1", "b", t0+1000)}
	p, s := beam.NewPipelineWithRoot()
	in := beam.WindowInto(s, window.NewFixedWindows(10*time.Minute), batches(t, s, rows, []int{2}))
	out := dedup.KeepLast(s, in, rowspec.PartitionBy("id"), rowspec.KindColumn("op")).Rows
	passert.Equals(s, global(s, beam.ParDo(s, formatStreamChange, out)), "+I o1/a", "-U o1/a", "+U o1/b")
	c := run(t, p)
	assert.Zero(t, c.MiniBatchDropped)
}

func formatStreamChange(r streamRow) string { return r.Op + " " + r.ID + "/" + r.Val }

func init() { register.Function1x1(formatStreamChange) }

// randomChangelog is a changelog stream over a few keys: +I/+U rows, -U/-D
// retractions and immediate resends, each key's TS and Seq distinct and
// shuffled against arrival. It returns the rows and batch sizes.
func randomChangelog(rng *rand.Rand, keys, n int) ([]streamRow, []int) {
	var rows []streamRow
	vals := map[string]int{}
	perm := map[string][]int{} // each key's ordering values, shuffled
	for k := range keys {
		perm[fmt.Sprintf("k%d", k)] = rng.Perm(n)
	}
	for arr := int64(1); len(rows) < n; arr++ {
		id := fmt.Sprintf("k%d", rng.IntN(keys))
		if len(rows) > 0 && rng.IntN(8) == 0 {
			rows = append(rows, rows[len(rows)-1]) // a resend: identical, same arrival
			continue
		}
		v := perm[id][vals[id]]
		vals[id]++
		rows = append(rows, streamRow{
			Op: []string{"+I", "+U", "+U", "+U", "-U", "-D"}[rng.IntN(6)], ID: id, Val: fmt.Sprintf("v%d", rng.IntN(3)),
			TS: at(10, 0).Add(time.Duration(v) * time.Second), Seq: int64(v), Arr: arr,
		})
	}
	var sizes []int
	for left := len(rows); left > 0; {
		b := min(left, 1+rng.IntN(8))
		sizes = append(sizes, b)
		left -= b
	}
	return rows, sizes
}

// lastRowPerKey is the differential's reference: each key's final row
// (the last by less), as netStreamChange renders it, or, when it is a
// retraction, none from a stream (it deleted what the stream inserted) and
// its -D from bounded input (the deletion of a row from before the input,
// which deletes nothing from an empty sink: net -1).
func lastRowPerKey(rows []streamRow, less func(a, b streamRow) bool) (stream, bounded []any) {
	last := map[string]streamRow{}
	for _, r := range rows {
		if l, ok := last[r.ID]; !ok || !less(r, l) {
			last[r.ID] = r
		}
	}
	for _, r := range last {
		if r.Op == "-U" || r.Op == "-D" {
			bounded = append(bounded, r.String()+" x-1")
			continue
		}
		stream = append(stream, r.String()+" x1")
		bounded = append(bounded, r.String()+" x1")
	}
	return stream, bounded
}

// The differential of KeepLast's expansions: random changelog streams in several bundles
// reach the same final state per key (the changelog applied) through the
// stateful expansion with and without MiniBatch and through the bounded
// expansion, in arrival order, OnTime and SequenceBy, and all agree with
// the reference: the key's last row by the mode's order.
func TestKeepLast_DifferentialStatefulWithAndWithoutMiniBatchAndBoundedReachTheSameFinalState(t *testing.T) {
	modes := []struct {
		name string
		opts []dedup.Option
		less func(a, b streamRow) bool
	}{
		{"arrival", nil, func(a, b streamRow) bool { return a.Arr < b.Arr }},
		{"OnTime", []dedup.Option{rowspec.OnTime("ts")}, func(a, b streamRow) bool { return a.TS.Before(b.TS) }},
		{"SequenceBy", []dedup.Option{rowspec.SequenceBy("seq")}, func(a, b streamRow) bool { return a.Seq < b.Seq }},
	}
	for _, seed := range []uint64{1, 2} {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 10))
			rows, sizes := randomChangelog(rng, 6, 60)
			p, s := beam.NewPipelineWithRoot()
			stream := batches(t, s, rows, sizes)
			bounded := beam.ParDo(s, stampArrival, beam.Create(s, toAnyRows(rows)...))
			for _, m := range modes {
				fromStream, fromBounded := lastRowPerKey(rows, m.less)
				require.NotEmpty(t, fromStream)
				for _, e := range []struct {
					name string
					in   beam.PCollection
					opt  dedup.Option
					want []any
				}{
					{"stateful", stream, dedup.MiniBatch(true), fromStream},
					{"stateful MiniBatch(false)", stream, dedup.MiniBatch(false), fromStream},
					{"bounded", bounded, dedup.MiniBatch(true), fromBounded},
				} {
					name := m.name + " " + e.name
					opts := slices.Concat([]dedup.Option{rowspec.PartitionBy("id"), rowspec.KindColumn("op"), dedup.UID(name), e.opt}, m.opts)
					out := dedup.KeepLast(s, e.in, opts...).Rows
					sc := s.Scope(name)
					final := beam.ParDo(sc, formatNet, stats.SumPerKey(sc, beam.ParDo(sc, netStreamChange, out)))
					passert.Equals(sc, final, e.want...)
				}
			}
			c := runLast(t, p)
			assert.Zero(t, c.Unaccounted(), "%+v", c)
			assert.Positive(t, c.MiniBatchDropped, "the fold folded rows")
		})
	}
}

func toAnyRows(rows []streamRow) []any {
	out := make([]any, len(rows))
	for i, r := range rows {
		out[i] = r
	}
	return out
}

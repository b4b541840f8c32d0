package step

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/testing/statetest"
	"github.com/beamdedup/beamdedup/transforms/dedup/internal/core"
	"github.com/beamdedup/beamdedup/transforms/dedup/internal/statecoder"
)

// A key's bucket is part of the state's identity (its state is in its
// bucket's cell): the hash and its bytes never change.
func TestBucketOf_AKeysBucketNeverChanges(t *testing.T) {
	assert.Equal(t, []byte{0, 0, 0, 0x14}, BucketKey([]byte("user-1"), 128))
	assert.Equal(t, []byte{0, 0, 0, 0x2e}, BucketKey([]byte("user-2"), 64))
	assert.Equal(t, []byte{0, 0, 0, 0}, BucketKey([]byte("anything"), 1))
}

// cellOf is what a table's writes leave in its cell, as the runner holds
// it, and the table read back from it.
type cellOf struct{ segs [][]byte }

func (c *cellOf) apply(ch change) {
	if ch.clear {
		c.segs = nil
	}
	c.segs = append(c.segs, ch.segments...)
}

func (c *cellOf) read(t *testing.T, buckets int) *bucketTable {
	tb, err := foldBucket(c.segs, buckets)
	require.NoError(t, err)
	return tb
}

func keyN(i int) []byte { return fmt.Appendf(nil, "key-%04d", i) }

// A bucket's cell takes a segment of each bundle's changes, and is
// rewritten, every live key at position 0 and no deleted one, once its
// changes outweigh its last rewrite or it holds maxSegments segments; read
// back, it holds what was written.
func TestBucketTable_AppendsChangesAndRewritesWhenTheyOutweighIt(t *testing.T) {
	ctx := metrics.SetBundleID(context.Background(), "b")
	m := newMetricSet("buckets-test")
	var cell cellOf
	want := map[string]core.State{}
	seen := core.State{Phase: core.Emitted}
	var segments, clears []int
	for bundle := range 40 {
		tb := cell.read(t, 8)
		for i := range 5 { // 5 new keys a bundle
			k := keyN(bundle*5 + i)
			tb.put(k, &seen)
			want[string(k)] = seen
		}
		if bundle%4 == 3 { // and a key deleted
			gone := keyN(bundle)
			tb.put(gone, &core.State{})
			delete(want, string(gone))
		}
		ch := tb.write(ctx, m)
		cell.apply(ch)
		segments = append(segments, len(cell.segs))
		if ch.clear {
			clears = append(clears, bundle)
		}
	}
	got := map[string]core.State{}
	tb := cell.read(t, 8)
	for k := range tb.entries {
		was, err := tb.get([]byte(k))
		require.NoError(t, err)
		got[k] = was.st
	}
	assert.Equal(t, want, got)
	assert.Equal(t, []int{2, 5, 11, 22}, clears, "a rewrite once the changes outweigh the last one: about twice the bundles between rewrites")
	assert.LessOrEqual(t, tb.delta, tb.base+len(cell.segs[len(cell.segs)-1]))
	t.Logf("segments after each bundle: %v", segments)
}

// However small the changes, a cell holds at most maxSegments segments.
func TestBucketTable_HoldsAtMostMaxSegments(t *testing.T) {
	ctx := metrics.SetBundleID(context.Background(), "b")
	m := newMetricSet("buckets-test")
	var cell cellOf
	big := cell.read(t, 1)
	for i := range 5000 {
		big.put(keyN(i), &core.State{Phase: core.Emitted})
	}
	cell.apply(big.write(ctx, m))
	for bundle := range 3 * maxSegments {
		tb := cell.read(t, 1)
		tb.put(keyN(bundle), &core.State{Phase: core.Emitted, ExpireAt: int64(bundle + 1)})
		cell.apply(tb.write(ctx, m))
		require.LessOrEqual(t, len(cell.segs), maxSegments)
	}
}

// A large bucket is rewritten in segments of at most maxSegmentBytes (a
// state request's payload each), all at position 0.
func TestBucketTable_RewritesALargeBucketInSegmentsOfBoundedSize(t *testing.T) {
	tb, err := foldBucket(nil, 1)
	require.NoError(t, err)
	row := make([]byte, 1000)
	for i := range 3000 {
		tb.put(keyN(i), &core.State{Phase: core.Emitted, Cand: row})
	}
	ch := tb.rewrite(metrics.SetBundleID(context.Background(), "b"), newMetricSet("buckets-test"))
	require.Greater(t, len(ch.segments), 2)
	for _, s := range ch.segments {
		assert.Less(t, len(s), maxSegmentBytes+1100)
		_, err := statecoder.FoldSegments([][]byte{s}, 1, func(*statecoder.Entry) {})
		require.NoError(t, err)
	}
	var cell cellOf
	cell.apply(ch)
	assert.Len(t, cell.read(t, 1).entries, 3000)
}

// A bucket's first write, and a change set however large, goes out in
// segments of at most maxSegmentBytes (a state request's payload each), all
// at the write's position, and the cell read back holds every key's
// latest entry: 30,000 new keys of 100-byte rows, then a third of them
// changed and a tenth deleted, in a bucket whose last rewrite outweighs
// the changes.
func TestBucketTable_NoSegmentOverTheCapOnAFirstWriteOrAChangeSet(t *testing.T) {
	ctx := metrics.SetBundleID(context.Background(), "b")
	m := newMetricSet("buckets-test")
	const keys = 30_000
	row := bytes.Repeat([]byte{'r'}, 100)
	var cell cellOf
	tb := cell.read(t, 1)
	want := map[string]core.State{}
	for i := range keys {
		st := core.State{Phase: core.Emitted, Cand: row}
		tb.put(keyN(i), &st)
		want[string(keyN(i))] = st
	}
	checkSegments := func(ch change, pos uint64) {
		t.Helper()
		require.Greater(t, len(ch.segments), 1)
		for _, s := range ch.segments {
			assert.LessOrEqual(t, len(s), maxSegmentBytes)
			n, _ := binary.Uvarint(s)
			assert.Equal(t, pos, n, "every segment of a write at its position")
		}
	}
	first := tb.write(ctx, m)
	assert.False(t, first.clear)
	checkSegments(first, 0)
	cell.apply(first)

	tb = cell.read(t, 1)
	for i := 0; i < keys; i += 3 {
		st := core.State{Phase: core.Emitted, Cand: row, ExpireAt: int64(i + 1)}
		tb.put(keyN(i), &st)
		want[string(keyN(i))] = st
	}
	for i := 1; i < keys; i += 10 {
		tb.put(keyN(i), &core.State{})
		delete(want, string(keyN(i)))
	}
	changes := tb.write(ctx, m)
	assert.False(t, changes.clear, "the changes weigh less than the last rewrite: appended")
	checkSegments(changes, 1)
	cell.apply(changes)

	got := map[string]core.State{}
	tb = cell.read(t, 1)
	for k := range tb.entries {
		was, err := tb.get([]byte(k))
		require.NoError(t, err)
		got[k] = was.st
	}
	assert.Equal(t, want, got)
}

// bucketsRun drives the step that keeps state per bucket (KeepFirst,
// without timers) through bundles of rows batched as BucketRows batches
// them, on a backend that stands for the harness's.
type bucketsRun struct {
	t       *testing.T
	u       *BucketsUntimed
	batcher *BucketRows
	backend *statetest.Bags
	out     []string
}

func newBucketsRun(t *testing.T, buckets int) *bucketsRun {
	t.Helper()
	cell := state.MakeBagState[[]byte]("keepfirst-buckets")
	u := &BucketsUntimed{P: Params{
		KeyType: beam.EncodedType{T: reflect.TypeFor[[]byte]()}, ValueType: beam.EncodedType{T: reflect.TypeFor[overlapRow]()},
		Metrics: "buckets-test", Overlap: OverlapWrites, Buckets: buckets, Dropped: true,
	}}
	require.NoError(t, u.Init(&cell))
	trustTheBackend(u.Step())
	f := &BucketRows{RowType: beam.EncodedType{T: reflect.TypeFor[overlapRow]()}, Buckets: buckets, MaxBytes: 256}
	require.NoError(t, f.Setup())
	b := statetest.NewBags()
	b.Jitter = false
	return &bucketsRun{t: t, u: u, batcher: f, backend: b}
}

// bundle runs rows through the step as one bundle, calling each after
// each batch is decided.
func (r *bucketsRun) bundle(rows []overlapRow, each func()) {
	r.t.Helper()
	ctx := context.Background()
	type batch struct{ key, rows []byte }
	var batches []batch
	collect := func(_ beam.EventTime, key, rows []byte) { batches = append(batches, batch{key, rows}) }
	r.batcher.StartBundle(collect)
	for _, row := range rows {
		require.NoError(r.t, r.batcher.ProcessElement(0, []byte(row.Key), row, collect))
	}
	r.batcher.FinishBundle(collect)
	emit := func(dropped string) rowEmit {
		return func(_ beam.EventTime, _ beam.T, v beam.V) { r.out = append(r.out, dropped+v.(overlapRow).Key) }
	}
	r.backend.Bundle(true)
	r.u.StartBundle(ctx, emit(""), emit("dropped "))
	for _, b := range batches {
		sp := &statetest.Provider{Bags: r.backend, Key: string(b.key)}
		require.NoError(r.t, r.u.ProcessElement(ctx, sp, b.key, b.rows, emit(""), emit("dropped ")))
		each()
	}
	require.NoError(r.t, r.u.FinishBundle(ctx, emit(""), emit("dropped ")))
	r.backend.Bundle(false)
}

// A bundle of only new keys (a file of distinct keys, a backfill) holds
// at most the tables' limit of keys, and a bucket's more (a bucket is read
// whole): at the limit its tables are written and forgotten, before the
// bundle's end; nothing is lost, and the next bundle finds every key.
func TestBucketsStep_ABundleOfOnlyNewKeysFlushesItsTablesAtTheLimit(t *testing.T) {
	const keys, buckets, limit = 2000, 64, 100
	r := newBucketsRun(t, buckets)
	r.u.b.limit = limit
	var rows []overlapRow
	perBucket := map[uint32]int{}
	for i := range keys {
		rows = append(rows, overlapRow{Key: fmt.Sprintf("k%05d", i), Op: "+I", N: i})
		perBucket[bucketOf([]byte(rows[i].Key), buckets)]++
	}
	largest := 0
	for _, n := range perBucket {
		largest = max(largest, n)
	}
	most, miscounted := 0, 0
	r.bundle(rows, func() {
		held := 0
		for _, tb := range r.u.b.tables {
			held += len(tb.entries)
		}
		if held != r.u.b.entries {
			miscounted++
		}
		most = max(most, held)
	})
	assert.Less(t, most, limit+largest, "at most the limit and a bucket's keys")
	assert.Zero(t, miscounted, "the keys counted are those the tables hold")
	assert.Len(t, r.out, keys, "a row per key")
	appends := 0
	for _, log := range r.backend.Log {
		for _, req := range log {
			if req == "append" {
				appends++
			}
		}
	}
	assert.Greater(t, appends, 2*buckets, "the tables were written at the limit, not only at the bundle's end")

	r.out = nil
	r.bundle(rows, func() {})
	assert.Len(t, r.out, keys)
	for _, o := range r.out {
		require.True(t, strings.HasPrefix(o, "dropped "), "every key remembered: %s", o)
	}
}

// A bucket's timers come due earliest first, each the key's latest: a key
// whose timer moved comes due at its new time only, and one that lost its
// state not at all.
func TestBucketTable_KeysComeDueByTheirLatestTimer(t *testing.T) {
	tb, err := foldBucket(nil, 1)
	require.NoError(t, err)
	for i, at := range []int64{30, 10, 20, 40} {
		tb.put(keyN(i), &core.State{Phase: core.Emitted})
		tb.setTimer(keyN(i), core.Timer{Kind: core.Cleanup, At: at})
	}
	tb.setTimer(keyN(1), core.Timer{Kind: core.Cleanup, At: 35}) // moved later
	tb.put(keyN(2), &core.State{})                               // gone
	next, ok := tb.nextDue()
	require.True(t, ok)
	assert.Equal(t, int64(30), next)
	var due []string
	for {
		k, tm, ok := tb.popDue(36)
		if !ok {
			break
		}
		due = append(due, fmt.Sprintf("%s@%d", k, tm.At))
	}
	assert.Equal(t, []string{"key-0000@30", "key-0001@35"}, due)
	next, ok = tb.nextDue()
	require.True(t, ok)
	assert.Equal(t, int64(40), next)
}

// The due heap hands its items back by time, then key, however they were
// pushed and whatever it was built from.
func TestTimerHeap_PopsByTimeThenKey(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	var items []dueItem
	for i := range 500 {
		items = append(items, dueItem{at: rnd.Int64N(50), key: string(keyN(rnd.IntN(100) + i%3))})
	}
	want := slices.Clone(items)
	slices.SortFunc(want, func(a, b dueItem) int {
		return cmp.Or(cmp.Compare(a.at, b.at), strings.Compare(a.key, b.key))
	})
	h := timerHeap(slices.Clone(items[:200]))
	h.init()
	for _, d := range items[200:] {
		h.push(d)
	}
	var got []dueItem
	for len(h) > 0 {
		got = append(got, h.pop())
	}
	assert.Equal(t, want, got)
}

// BenchmarkBucketTable_ARowAloneInItsBucket is state per bucket's worst
// case: a streaming bundle of a few rows over many stored keys, so that
// each row is alone in its bucket in its bundle, and its bundle reads its
// bucket whole (every stored key's state) to decide it, and appends a
// segment for it. One op is one such row: the read of a bucket of
// keysPerBucket stored keys (the bucket's cell as the runner holds it, one
// rewrite at position 0), the decoding of its table, the row's get, put
// and the segment written. bytes_read/row is the cell's size, what the
// runner sends the step for that row; per_key_bytes/row what a cell per
// key sends (the key's own state). The runner's side (gRPC, its copy of
// the bytes) is not in ns/op.
//
//	go test -run='^$' -bench=BucketTable_ARowAlone -benchtime=2000x ./transforms/dedup/internal/step/
func BenchmarkBucketTable_ARowAloneInItsBucket(b *testing.B) {
	row := bytes.Repeat([]byte{'r'}, 64) // an orders row is 64 bytes encoded
	for _, tc := range []struct {
		name string
		st   core.State
	}{
		{"keepfirst_stateTTL", core.State{Phase: core.Emitted, ExpireAt: 1_764_000_000_000}},
		{"keeplast_64B_row", core.State{Phase: core.Emitted, Cand: row, CandTime: 1_764_000_000_000, ExpireAt: 1_764_000_000_000}},
	} {
		// 100,000 and 1,000,000 stored keys in the default 128 buckets.
		for _, perBucket := range []int{781, 7812} {
			b.Run(fmt.Sprintf("%s/%d_keys_a_bucket", tc.name, perBucket), func(b *testing.B) {
				ctx := metrics.SetBundleID(context.Background(), "b")
				m := newMetricSet("buckets-bench")
				tb, err := foldBucket(nil, 128)
				require.NoError(b, err)
				for i := range perBucket {
					tb.put(keyN(i), &tc.st)
				}
				var cell cellOf
				cell.apply(tb.rewrite(ctx, m))
				cellBytes := 0
				for _, s := range cell.segs {
					cellBytes += len(s)
				}
				one := statecoder.Append(nil, &tc.st)
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					tb, err := foldBucket(cell.segs, 128)
					if err != nil {
						b.Fatal(err)
					}
					k := keyN(perBucket + i) // a new key
					if _, err := tb.get(k); err != nil {
						b.Fatal(err)
					}
					tb.put(k, &tc.st)
					_ = tb.write(ctx, m) // not applied: every op reads the same cell
				}
				b.ReportMetric(float64(cellBytes), "bytes_read/row")
				b.ReportMetric(float64(len(one)+len(keyN(0))), "per_key_bytes/row")
			})
		}
	}
}

// BenchmarkBucketTable_ARowOfABundle is what a bucket's table costs a row
// of a bundle that holds many rows per bucket (a file, a backlog): the
// key's get, its put and its timer set, and its share of the bundle's
// write. One op is one row, in bundles of 10,000 rows of one bucket: of
// new keys on an empty bucket, or of the keys the bucket's cell already
// holds (each read with the bucket, its state and timer changed). The
// rows' states are event-time KeepFirst's: a seen marker, a cleanup timer.
//
//	go test -run='^$' -bench=BucketTable_ARowOfABundle -benchmem ./transforms/dedup/internal/step/
func BenchmarkBucketTable_ARowOfABundle(b *testing.B) {
	const bundle = 10_000
	keys := make([][]byte, bundle)
	for i := range keys {
		keys[i] = keyN(i)
	}
	ctx := metrics.SetBundleID(context.Background(), "b")
	m := newMetricSet("buckets-bench")
	stored := func(b *testing.B) [][]byte {
		tb, err := foldBucket(nil, 128)
		require.NoError(b, err)
		for i, k := range keys {
			tb.put(k, &core.State{Phase: core.Emitted, ExpireAt: int64(i)})
			tb.setTimer(k, core.Timer{Kind: core.Cleanup, At: int64(i)})
		}
		var cell cellOf
		cell.apply(tb.rewrite(ctx, m))
		return cell.segs
	}
	for _, tc := range []struct {
		name string
		cell func(b *testing.B) [][]byte
	}{
		{"new_keys", func(*testing.B) [][]byte { return nil }},
		{"stored_keys", stored},
	} {
		b.Run(tc.name, func(b *testing.B) {
			segs := tc.cell(b)
			st := core.State{Phase: core.Emitted}
			b.ReportAllocs()
			b.ResetTimer()
			var tb *bucketTable
			for i := range b.N {
				j := i % bundle
				if j == 0 {
					if tb != nil {
						_ = tb.write(ctx, m)
					}
					b.StopTimer()
					var err error
					if tb, err = foldBucket(segs, 128); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				k := keys[j]
				if _, err := tb.get(k); err != nil {
					b.Fatal(err)
				}
				st.ExpireAt = int64(bundle + i)
				tb.put(k, &st)
				tb.setTimer(k, core.Timer{Kind: core.Cleanup, At: st.ExpireAt})
			}
		})
	}
}

// BenchmarkBucketsStep_ABundleOfKeepLastRows is the stateful step on state
// per bucket deciding a bundle of 10,000 KeepLast (upsert) rows over 2,000
// keys in 16 buckets, batched as BucketRows batches them (not timed): each
// row decoded from its batch, decided on its bucket's table, stored, and
// emitted; the buckets read and written once a bundle. One op is one
// bundle; ns/row is per row.
//
//	go test -run='^$' -bench=BucketsStep_ABundleOfKeepLastRows -benchmem ./transforms/dedup/internal/step/
func BenchmarkBucketsStep_ABundleOfKeepLastRows(b *testing.B) {
	const rows, keys, buckets = 10_000, 2_000, 16
	ctx := context.Background()
	cell := state.MakeBagState[[]byte]("keeplast-buckets")
	u := &BucketsUntimed{P: Params{
		Last: true, Rules: core.Config{Upsert: true},
		KeyType: beam.EncodedType{T: reflect.TypeFor[[]byte]()}, ValueType: beam.EncodedType{T: reflect.TypeFor[overlapRow]()},
		Metrics: "buckets-bench", Overlap: OverlapWrites, Buckets: buckets,
	}}
	require.NoError(b, u.Init(&cell))
	trustTheBackend(u.Step())
	f := &BucketRows{RowType: beam.EncodedType{T: reflect.TypeFor[overlapRow]()}, Buckets: buckets}
	require.NoError(b, f.Setup())
	type batch struct{ key, rows []byte }
	var batches []batch
	collect := func(_ beam.EventTime, key, rows []byte) { batches = append(batches, batch{key, rows}) }
	f.StartBundle(collect)
	for i := range rows {
		key := fmt.Sprintf("key-%05d", i%keys)
		require.NoError(b, f.ProcessElement(beam.EventTime(i), []byte(key), overlapRow{Key: key, Op: "+I", N: i}, collect))
	}
	f.FinishBundle(collect)
	backend := statetest.NewBags()
	backend.Jitter = false
	emitted := 0
	emit := func(beam.EventTime, beam.T, beam.V) { emitted++ }
	b.ReportAllocs()
	for b.Loop() {
		backend.Bundle(true)
		u.StartBundle(ctx, emit, emit)
		for _, bt := range batches {
			if err := u.ProcessElement(ctx, &statetest.Provider{Bags: backend, Key: string(bt.key)}, bt.key, bt.rows, emit, emit); err != nil {
				b.Fatal(err)
			}
		}
		if err := u.FinishBundle(ctx, emit, emit); err != nil {
			b.Fatal(err)
		}
		backend.Bundle(false)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rows), "ns/row")
}

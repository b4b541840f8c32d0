package step

import (
	"context"
	"fmt"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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

package dedup_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/teststream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/testing/prismtest"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// On Prism, the step that keeps state per bucket keeps the rows the step
// with a cell per key keeps, side by side in one pipeline: event-time
// KeepFirst on a stream (its candidates finalized by the buckets' timers
// as the watermark passes them, its keys expired by their cleanup at the
// stream's end), on rows at distinct times in time order, none behind the
// watermark, within one retention: each key's earliest row, whatever the
// order the runner hands the layouts a key's rows and firings in (Prism
// orders a key's elements and timers by time, and a bucket's batch is
// timed by its earliest row); and on a file (AsStream, in the default
// buckets), where the row kept depends on arrival order, which a bucket's
// batch keeps (rows of one time in arrival order): the same rows, a row
// per key, every row counted.
func TestStatePerBucket_KeepsTheRowsOfACellPerKeyOnPrism(t *testing.T) {
	t.Run("KeepFirst, event time, EventTimeTTL, on a stream", func(t *testing.T) {
		const keys = 300
		rnd := rand.New(rand.NewPCG(3, 5))
		p, s := beam.NewPipelineWithRoot()
		ts := teststream.NewConfig()
		base := at(10, 0)
		require.NoError(t, ts.AdvanceWatermark(ms(base)))
		rows := 0
		for step := range 6 {
			offsets := rnd.Perm(20 * 60)[:150] // seconds into the step's 20 minutes, distinct
			slices.Sort(offsets)
			for _, off := range offsets {
				k := rnd.IntN(keys)
				when := base.Add(time.Duration(step)*(10*time.Minute+time.Millisecond) + time.Duration(off)*time.Second)
				e := timedEvent{fmt.Sprintf("u%03d", k), fmt.Sprint(rows), when}
				require.NoError(t, ts.AddElements(ms(when), e))
				rows++
			}
			require.NoError(t, ts.AdvanceWatermark(ms(base.Add(time.Duration(step+1)*10*time.Minute))))
		}
		require.NoError(t, ts.AdvanceWatermarkToInfinity())
		in := beam.ParDo(s, stampRowtime, teststream.Create(s, ts))
		opts := []dedup.Option{rowspec.PartitionBy("user_id"), rowspec.OnTime("rowtime"), dedup.EventTimeTTL(2 * time.Hour)}
		bucketed := dedup.KeepFirst(s, in, append(opts, dedup.UID("bucketed"), dedup.StateBuckets(5))...)
		perKey := dedup.KeepFirst(s, in, append(opts, dedup.UID("perkey"))...)
		passert.Equals(s, bucketed.Rows, perKey.Rows)
		pr := prismtest.Run(t, p, 2*time.Minute)
		b, k := dedup.CountersOf(pr, "bucketed"), dedup.CountersOf(pr, "perkey")
		assert.Equal(t, int64(rows), b.RowsIn)
		assert.Equal(t, k.Emitted, b.Emitted)
		assert.Greater(t, b.Emitted, int64(keys/2))
		assert.Zero(t, b.Pending(), "every candidate finalized")
		assert.Equal(t, b.Emitted, b.KeysExpired, "every key's cleanup timer fired")
		// A read per bucket and bundle; Prism fires a bucket's timer a bundle
		// at a time, and a firing decides the keys due at its time only.
		assert.Less(t, b.StateReads, k.StateReads)
	})
	for _, tc := range []struct {
		name string
		last bool
		opts []dedup.Option
	}{
		{"KeepFirst, watermarkless, on a file", false, []dedup.Option{dedup.MiniBatch(false)}},
		{"KeepLast, upserts, on a file", true, []dedup.Option{rowspec.Upsert(), dedup.MiniBatch(false)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const keys = 3000
			parts := bucketParts(keys, false)
			p, s := beam.NewPipelineWithRoot()
			in, dedupe := bucketInput(s, parts, tc.last)
			opts := append([]dedup.Option{rowspec.PartitionBy("key"), dedup.AsStream()}, tc.opts...)
			bucketed := dedupe(s, in, append(opts, dedup.UID("bucketed"))...)
			perKey := dedupe(s, in, append(opts, dedup.UID("perkey"), dedup.StateBuckets(0))...)
			passert.Equals(s.Scope("Rows"), bucketed.Rows, perKey.Rows)
			if !tc.last {
				passert.Count(s.Scope("RowCount"), bucketed.Rows, "rows", keys) // a row per key
			}
			pr := prismtest.Run(t, p, 2*time.Minute)
			countedAsPerKey(t, pr, tc.last, parts, keys)
		})
	}
}

// countedAsPerKey asserts that the transform of UID "bucketed" counted
// what the one of UID "perkey" did over parts, a row kept per key, in a
// state read per bucket and bundle.
func countedAsPerKey(t *testing.T, pr beam.PipelineResult, last bool, parts [3][]bucketRow, keys int) {
	t.Helper()
	total := int64(len(parts[0]) + len(parts[1]) + len(parts[2]))
	if last {
		b, k := dedup.LastCountersOf(pr, "bucketed"), dedup.LastCountersOf(pr, "perkey")
		assert.Equal(t, total, b.RowsIn)
		assert.Equal(t, int64(keys), b.Inserts)
		assert.Equal(t, k.Inserts, b.Inserts)
		assert.Zero(t, b.Unaccounted())
		assert.Less(t, b.StateReads, int64(keys/10), "a read per bucket and bundle")
		return
	}
	b, k := dedup.CountersOf(pr, "bucketed"), dedup.CountersOf(pr, "perkey")
	assert.Equal(t, k, dedup.Counters{RowsIn: b.RowsIn, Emitted: b.Emitted, DuplicatesDropped: b.DuplicatesDropped, Cost: k.Cost})
	assert.Equal(t, total, b.RowsIn)
	assert.Equal(t, int64(keys), b.Emitted)
	assert.Less(t, b.StateReads, int64(keys/10), "a read per bucket and bundle")
}

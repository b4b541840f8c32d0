package step

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/transforms/dedup/internal/core"
	"github.com/beamdedup/beamdedup/transforms/rowkind"
)

// mergeRun is what a merge emitted, kept and dropped rows as
// "key@time:row", sorted, and the counters it counted.
type mergeRun struct {
	kept, dropped []string
	counters      map[string]int64
}

func (r *mergeRun) emitters() (emit, drop rowEmit) {
	rec := func(to *[]string) rowEmit {
		return func(ts beam.EventTime, key beam.T, row beam.V) {
			*to = append(*to, fmt.Sprintf("%s@%d:%v", key, ts, row))
		}
	}
	return rec(&r.kept), rec(&r.dropped)
}

func (r *mergeRun) finish(ctx context.Context) {
	slices.Sort(r.kept)
	slices.Sort(r.dropped)
	r.counters = map[string]int64{}
	metrics.Extractor{SumInt64: func(l metrics.Labels, v int64) { r.counters[l.Name()] += v }}.ExtractFrom(metrics.GetStore(ctx))
}

// keyedCandidate is a one-row candidate of a key, in a bundle.
type keyedCandidate struct {
	key []byte
	c   candidate
}

// mergeBundles are bundles of one-row candidates (as KeyCandidates makes
// them without the in-bundle merge, or as its flushes do) over keys keys:
// few distinct times and sequence values, so that rows tie across bundles
// and the encoded row decides, and with retractions some -U/-D rows.
func mergeBundles(dir core.Direction, keys, bundles, perBundle int, seq, retractions bool) [][]keyedCandidate {
	rnd := rand.New(rand.NewPCG(7, uint64(keys)))
	enc := beam.NewElementEncoder(reflect.TypeFor[string]())
	out := make([][]keyedCandidate, bundles)
	for b := range out {
		for i := range perBundle {
			var row bytes.Buffer
			if err := enc.Encode(fmt.Sprintf("b%d-r%d", b, i%5), &row); err != nil {
				panic(err)
			}
			r := core.Row{Kind: rowkind.Insert, Time: 1_700_000_000_000 + rnd.Int64N(3), Stamped: !seq, Row: row.Bytes()}
			if seq {
				r.Seq = []byte{byte(rnd.IntN(3))}
			}
			if retractions && rnd.IntN(5) == 0 {
				r.Kind = rowkind.Delete
			}
			// through the candidate's coder, as the shuffle hands it on
			c, err := DecodeCandidate(EncodeCandidate(dir.One(r)))
			if err != nil {
				panic(err)
			}
			out[b] = append(out[b], keyedCandidate{[]byte(fmt.Sprintf("k%04d", rnd.IntN(keys))), c})
		}
	}
	return out
}

// The bucketed merge keeps, drops and counts what the per-key merge does
// when a key's candidates come in different bundles, tie on their order,
// and reach the merge in any order: Bucket over each bundle, then
// MergeBucket over each bucket's batches (shuffled), against MergeGroup
// over each key's candidates (shuffled), with few buckets (many keys per
// bucket) and batch caps small enough that a bucket's batch is emitted
// several times per bundle.
func TestMergeBucket_KeepsDropsAndCountsAsMergeGroupAcrossBundles(t *testing.T) {
	for _, tc := range []struct {
		name              string
		last, dropped     bool
		seq, retractions  bool
		buckets, maxBytes int
	}{
		{"KeepFirst, rows tied on their timestamps", false, false, false, false, 0, 0},
		{"KeepFirst by sequence value, dropped rows, a small cap", false, true, true, false, 7, 100},
		{"KeepFirst of a changelog, dropped rows, one bucket", false, true, true, true, 1, 0},
		{"KeepLast by sequence value of a changelog, dropped rows, a small cap", true, true, true, true, 3, 64},
		{"KeepLast of a changelog, rows tied on their timestamps", true, false, false, true, 0, 300},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := core.KeepFirst
			if tc.last {
				dir = core.KeepLast
			}
			bundles := mergeBundles(dir, 400, 4, 1500, tc.seq, tc.retractions)
			from := FromCandidate{ValueType: beam.EncodedType{T: reflect.TypeFor[string]()}, Last: tc.last, Metrics: "test"}
			rnd := rand.New(rand.NewPCG(1, 2))

			// Per key.
			var perKey mergeRun
			ctx := metrics.SetPTransformID(metrics.SetBundleID(context.Background(), "perkey"), "merge")
			g := MergeGroup{Dir: dir, Dropped: tc.dropped, From: from}
			require.NoError(t, g.Setup())
			byKey := map[string][]candidate{}
			for _, b := range bundles {
				for _, kc := range b {
					byKey[string(kc.key)] = append(byKey[string(kc.key)], kc.c)
				}
			}
			emit, drop := perKey.emitters()
			for k, cands := range byKey {
				rnd.Shuffle(len(cands), func(i, j int) { cands[i], cands[j] = cands[j], cands[i] })
				require.NoError(t, g.ProcessElement(ctx, []byte(k), iterate(cands), emit, drop))
			}
			perKey.finish(ctx)

			// Bucketed.
			var bucketed mergeRun
			ctx = metrics.SetPTransformID(metrics.SetBundleID(context.Background(), "bucketed"), "merge")
			bf := Bucket{Buckets: tc.buckets, MaxBytes: tc.maxBytes}
			require.NoError(t, bf.Setup())
			batches := map[uint32][][]byte{}
			emitBatch := func(_ beam.EventTime, k uint32, b []byte) { batches[k] = append(batches[k], b) }
			for _, b := range bundles {
				bf.StartBundle(emitBatch)
				for _, kc := range b {
					bf.ProcessElement(0, kc.key, kc.c, emitBatch)
				}
				bf.FinishBundle(emitBatch)
			}
			mb := MergeBucket{Merge: MergeGroup{Dir: dir, Dropped: tc.dropped, From: from}}
			require.NoError(t, mb.Setup())
			emit, drop = bucketed.emitters()
			several := false
			for k, bs := range batches {
				several = several || len(bs) > len(bundles)
				rnd.Shuffle(len(bs), func(i, j int) { bs[i], bs[j] = bs[j], bs[i] })
				require.NoError(t, mb.ProcessElement(ctx, k, iterate(bs), emit, drop))
			}
			bucketed.finish(ctx)

			if tc.maxBytes != 0 {
				assert.True(t, several, "no bucket's batch reached the cap")
			}
			assert.NotEmpty(t, perKey.kept)
			if tc.dropped {
				assert.NotEmpty(t, perKey.dropped)
			}
			assert.Equal(t, perKey.kept, bucketed.kept)
			assert.Equal(t, perKey.dropped, bucketed.dropped)
			assert.Equal(t, perKey.counters, bucketed.counters)
			assert.NotEmpty(t, perKey.counters)
		})
	}
}

// iterate is a GroupByKey's iterator over vs.
func iterate[T any](vs []T) func(*T) bool {
	i := 0
	return func(v *T) bool {
		if i == len(vs) {
			return false
		}
		*v, i = vs[i], i+1
		return true
	}
}

// A bucket's batch of rows holds them in element-time order, rows of one
// time in arrival order, whatever order the keying step emitted them in
// (the order Prism hands the per-key layout a key's rows in), also when
// the batch is cut at its size cap.
func TestBucketRows_BatchesRowsInTimeOrderAndTiesInArrivalOrder(t *testing.T) {
	type in struct {
		key string
		ts  beam.EventTime
		row string
	}
	rows := []in{{"a", 2000, "a-B"}, {"b", 1500, "b-1"}, {"a", 1000, "a-A"}, {"b", 2000, "b-2"}, {"a", 2000, "a-C"}, {"c", 1000, "c-1"}}
	for _, tc := range []struct {
		name     string
		maxBytes int
		want     [][]string
	}{
		{"one batch", 0, [][]string{{"a-A@1000", "c-1@1000", "b-1@1500", "a-B@2000", "b-2@2000", "a-C@2000"}}},
		{"cut after three rows", 25, [][]string{{"a-A@1000", "b-1@1500", "a-B@2000"}, {"c-1@1000", "b-2@2000", "a-C@2000"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &BucketRows{RowType: beam.EncodedType{T: reflect.TypeFor[string]()}, Buckets: 1, MaxBytes: tc.maxBytes}
			require.NoError(t, f.Setup())
			dec := beam.NewElementDecoder(reflect.TypeFor[string]())
			var got [][]string
			var at []beam.EventTime
			emit := func(ts beam.EventTime, _ []byte, b []byte) {
				var batch []string
				for len(b) > 0 {
					_, rowTS, enc, rest, err := nextRow(b)
					require.NoError(t, err)
					row, err := dec.Decode(bytes.NewReader(enc))
					require.NoError(t, err)
					batch = append(batch, fmt.Sprintf("%v@%d", row, rowTS))
					b = rest
				}
				got, at = append(got, batch), append(at, ts)
			}
			f.StartBundle(emit)
			for _, r := range rows {
				require.NoError(t, f.ProcessElement(r.ts, []byte(r.key), r.row, emit))
			}
			f.FinishBundle(emit)
			assert.Equal(t, tc.want, got)
			for i, ts := range at {
				assert.Equal(t, ts, beam.EventTime(1000), "batch %d is at its earliest row's time", i)
			}
		})
	}
}

// A batch cut short, anywhere, is an error, never a row or a candidate.
func TestBatches_ATruncatedBatchIsAnErrorNeverARow(t *testing.T) {
	var rows []byte
	f := &BucketRows{RowType: beam.EncodedType{T: reflect.TypeFor[string]()}, Buckets: 1}
	require.NoError(t, f.Setup())
	f.StartBundle(nil)
	require.NoError(t, f.ProcessElement(1000, []byte("key"), "row", nil))
	f.FinishBundle(func(_ beam.EventTime, _, b []byte) { rows = b })
	key, ts, row, rest, err := nextRow(rows)
	require.NoError(t, err)
	assert.Equal(t, []string{"key", "1000", "row", ""}, []string{string(key), fmt.Sprint(ts), string(row[1:]), string(rest)})

	candidates := binary.AppendUvarint(nil, 3)
	candidates = append(candidates, "key"...)
	candidates = binary.AppendUvarint(candidates, 4)
	candidates = append(candidates, "cand"...)
	key, enc, rest, err := nextCandidate(candidates)
	require.NoError(t, err)
	assert.Equal(t, []string{"key", "cand", ""}, []string{string(key), string(enc), string(rest)})

	for n := range len(rows) {
		_, _, _, _, err := nextRow(rows[:n])
		assert.ErrorContains(t, err, "corrupt batch of rows", "cut at %d", n)
	}
	for n := range len(candidates) {
		_, _, _, err := nextCandidate(candidates[:n])
		assert.ErrorContains(t, err, "corrupt candidate batch", "cut at %d", n)
	}
}

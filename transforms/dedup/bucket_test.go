package dedup_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/stretchr/testify/assert"

	"github.com/beamdedup/beamdedup/internal/testhook"
	"github.com/beamdedup/beamdedup/testing/prismtest"
	"github.com/beamdedup/beamdedup/transforms/deadletter"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// bucketRow is a row of the bucketed merge's tests: many keys, each with
// rows in several parts of the input, whose Seq values tie across parts
// and whose Payload says which part a kept row came from.
type bucketRow struct {
	Op      string `beam:"op"`
	Key     string `beam:"key"`
	Seq     int64  `beam:"seq"`
	Payload string `beam:"payload"`
}

func init() {
	beam.RegisterType(reflectType[bucketRow]())
	register.Function1x1(deadRowAndReason)
}

// deadRowAndReason is a dead letter without the UID of the transform
// that refused it.
func deadRowAndReason(d deadletter.DeadLetter) string { return d.Row + ": " + d.Reason }

// perKeyMerge makes the bounded merge group each key's candidates, as it
// did before the bucketed merge.
func perKeyMerge() dedup.Option {
	return testhook.DedupOption(func(h *testhook.Dedup) { h.PerKeyMerge = true }).(dedup.Option)
}

// bucketBytes caps the bucketed merge's batches at n bytes.
func bucketBytes(n int) dedup.Option {
	return testhook.DedupOption(func(h *testhook.Dedup) { h.BucketBytes = n }).(dedup.Option)
}

// bucketParts are three parts of an input (one Create each) over keys
// 0..keys-1: every key in two or three of them, some twice in a part (an
// exact copy), Seq values that tie across parts, with changelog the
// -U/+U/-D of some keys, and a few rows with an unknown kind (dead
// letters).
func bucketParts(keys int, changelog bool) [3][]bucketRow {
	var parts [3][]bucketRow
	for b := range parts {
		for i := range keys {
			if (i+b)%3 == 0 && i%5 != 0 {
				continue // not in this part; every fifth key is in all three
			}
			r := bucketRow{Op: "+I", Key: fmt.Sprintf("k%05d", i), Seq: int64((i + b) % 2), Payload: fmt.Sprintf("b%d", b)}
			if changelog {
				switch {
				case i%7 == 0 && b == 2:
					r.Op = "-D"
				case i%11 == 0 && b == 1:
					r.Op = "-U"
				case i%11 == 0 && b == 2:
					r.Op = "+U"
				case i%97 == 0 && b == 0:
					r.Op = "??" // a dead letter
				}
			}
			parts[b] = append(parts[b], r)
			if i%13 == 0 {
				parts[b] = append(parts[b], r)
			}
		}
	}
	return parts
}

// bucketInput is parts as one collection of three bundles' worth (three
// Creates flattened), and the transform, KeepFirst or KeepLast (last).
func bucketInput(s beam.Scope, parts [3][]bucketRow, last bool) (beam.PCollection, func(beam.Scope, beam.PCollection, ...dedup.Option) dedup.Result) {
	var creates []beam.PCollection
	for _, part := range parts {
		creates = append(creates, beam.CreateList(s, part))
	}
	if last {
		return beam.Flatten(s, creates...), dedup.KeepLast
	}
	return beam.Flatten(s, creates...), dedup.KeepFirst
}

// The bucketed merge (the bounded expansion's candidates batched per
// key-hash bucket across the shuffle) keeps the same row per key as the
// per-key merge, ties and the changelog's final kinds included, drops the
// same rows, dead-letters the same rows and counts the same counters: both
// run side by side on the same input in one pipeline on Prism, with the
// default batch cap and with one small enough that a bucket's batch is
// emitted many times. (Prism hands the flattened parts to the keying step
// as one bundle; step's TestMergeBucket_* drives candidates of a key in
// different bundles.)
func TestBucketedMerge_SameRowsAndCountersAsPerKeyMerge(t *testing.T) {
	for _, tc := range []struct {
		name      string
		last      bool
		changelog bool
		opts      []dedup.Option
	}{
		{"KeepFirst, rows tied on their timestamp", false, false, nil},
		{"KeepFirst by SequenceBy, ties across parts", false, false, []dedup.Option{rowspec.SequenceBy("seq")}},
		{"KeepFirst by SequenceBy with the dropped rows", false, false, []dedup.Option{rowspec.SequenceBy("seq"), dedup.OutputDropped()}},
		{"KeepFirst of a changelog", false, true, []dedup.Option{rowspec.KindColumn("op"), dedup.OutputDropped()}},
		{"KeepLast by SequenceBy, ties across parts", true, false, []dedup.Option{rowspec.SequenceBy("seq"), rowspec.Upsert()}},
		{"KeepLast of a changelog, upserts", true, true, []dedup.Option{rowspec.KindColumn("op"), rowspec.SequenceBy("seq"), rowspec.Upsert()}},
		{"KeepLast of a changelog with the dropped rows", true, true, []dedup.Option{rowspec.KindColumn("op"), dedup.OutputDropped()}},
	} {
		for _, capBytes := range []int{0, 200} {
			t.Run(fmt.Sprintf("%s, batch cap %d", tc.name, capBytes), func(t *testing.T) {
				const keys = 3000
				parts := bucketParts(keys, tc.changelog)
				p, s := beam.NewPipelineWithRoot()
				in, dedupe := bucketInput(s, parts, tc.last)
				opts := append([]dedup.Option{rowspec.PartitionBy("key")}, tc.opts...)
				bucketed := dedupe(s, in, append(opts, dedup.UID("bucketed"), bucketBytes(capBytes))...)
				perKey := dedupe(s, in, append(opts, dedup.UID("perkey"), perKeyMerge())...)
				passert.Equals(s.Scope("Rows"), bucketed.Rows, perKey.Rows)
				if !tc.changelog {
					passert.Count(s.Scope("RowCount"), bucketed.Rows, "rows", keys) // a row per key
				}
				passert.Equals(s.Scope("DeadLetters"), beam.ParDo(s, deadRowAndReason, bucketed.DeadLetters), beam.ParDo(s, deadRowAndReason, perKey.DeadLetters))
				if bucketed.Dropped.IsValid() {
					passert.Equals(s.Scope("Dropped"), bucketed.Dropped, perKey.Dropped)
				}
				pr := prismtest.Run(t, p, 2*time.Minute)
				total := int64(len(parts[0]) + len(parts[1]) + len(parts[2]))
				if tc.last {
					b, k := dedup.LastCountersOf(pr, "bucketed"), dedup.LastCountersOf(pr, "perkey")
					assert.Equal(t, k, b)
					assert.Equal(t, total, b.RowsIn)
					assert.Zero(t, b.Unaccounted())
					return
				}
				b, k := dedup.CountersOf(pr, "bucketed"), dedup.CountersOf(pr, "perkey")
				assert.Equal(t, k, b)
				assert.Equal(t, total, b.RowsIn)
				assert.Positive(t, b.DuplicatesDropped)
				assert.Zero(t, b.Pending())
			})
		}
	}
}

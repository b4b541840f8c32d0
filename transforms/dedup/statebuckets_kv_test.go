package dedup_test

import (
	"fmt"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/teststream"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/testing/prismtest"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// The KV inputs of the tests below: a bucketRow keyed by its Key as a
// string, as the number in it, and as a float whose zero comes as both
// -0 and 0 (one key: KeyPairs makes it canonical before its bytes are
// taken).
func stringKeyed(r bucketRow) (string, bucketRow) { return r.Key, r }

func intKeyed(r bucketRow) (int64, bucketRow) {
	n, _ := strconv.ParseInt(r.Key[1:], 10, 64)
	return n, r
}

func floatKeyed(r bucketRow) (float64, bucketRow) {
	n, _ := strconv.ParseInt(r.Key[1:], 10, 64)
	if n == 0 && r.Payload == "b1" {
		return math.Copysign(0, -1), r
	}
	return float64(n), r
}

// The kept KVs as lines, key first, for passert.
func stringLine(k string, r bucketRow) string {
	return fmt.Sprintf("%s %s %s %s", k, r.Op, r.Key, r.Payload)
}
func intLine(k int64, r bucketRow) string {
	return fmt.Sprintf("%d %s %s %s", k, r.Op, r.Key, r.Payload)
}
func floatLine(k float64, r bucketRow) string {
	return fmt.Sprintf("%g %s %s %s", k, r.Op, r.Key, r.Payload)
}
func keyedOf(kind string) (key, line any) {
	switch kind {
	case "int":
		return intKeyed, intLine
	case "float":
		return floatKeyed, floatLine
	}
	return stringKeyed, stringLine
}

func init() {
	register.Function1x2(stringKeyed)
	register.Function1x2(intKeyed)
	register.Function1x2(floatKeyed)
	register.Function2x1(stringLine)
	register.Function2x1(intLine)
	register.Function2x1(floatLine)
}

// A KV input keeps its state per bucket as struct rows do: on a file
// (AsStream, in the default buckets) and on a stream (StateBuckets), for
// string, integer and float keys, KeepFirst and KeepLast keep the KVs,
// keys included, that a cell per key keeps, drop the same rows and count
// them, in a read per bucket and bundle.
func TestStatePerBucket_OnKVInputKeepsTheKVsOfACellPerKey(t *testing.T) {
	const keys = 2000
	for _, tc := range []struct {
		name   string
		key    string
		last   bool
		stream bool
	}{
		{"KeepFirst, string keys, on a file", "string", false, false},
		{"KeepFirst, float keys with -0 and 0, on a file", "float", false, false},
		{"KeepLast, integer keys, on a file", "int", true, false},
		{"KeepFirst, string keys, on a stream", "string", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parts := bucketParts(keys, false)
			p, s := beam.NewPipelineWithRoot()
			var rows beam.PCollection
			if tc.stream {
				ts := teststream.NewConfig()
				for i, part := range parts {
					var elems []any
					for _, r := range part {
						elems = append(elems, r)
					}
					require.NoError(t, ts.AddElementList(int64(i+1)*1000, elems))
					require.NoError(t, ts.AdvanceWatermark(int64(i+1)*1000))
				}
				require.NoError(t, ts.AdvanceWatermarkToInfinity())
				rows = teststream.Create(s, ts)
			} else {
				rows, _ = bucketInput(s, parts, false)
			}
			key, line := keyedOf(tc.key)
			in := beam.ParDo(s, key, rows)
			dedupe := dedup.KeepFirst
			if tc.last {
				dedupe = dedup.KeepLast
			}
			opts := []dedup.Option{dedup.AsStream(), dedup.OutputDropped()}
			if tc.stream {
				opts = []dedup.Option{dedup.StateBuckets(8), dedup.OutputDropped()}
			}
			if tc.last {
				opts = append(opts, rowspec.Upsert())
			}
			bucketed := dedupe(s, in, append(opts, dedup.UID("bucketed"))...)
			perKey := dedupe(s, in, append(opts, dedup.UID("perkey"), dedup.StateBuckets(0))...)
			passert.Equals(s.Scope("Rows"), beam.ParDo(s, line, bucketed.Rows), beam.ParDo(s, line, perKey.Rows))
			passert.Equals(s.Scope("Dropped"), beam.ParDo(s, line, bucketed.Dropped), beam.ParDo(s, line, perKey.Dropped))
			if !tc.last {
				passert.Count(s.Scope("RowCount"), bucketed.Rows, "rows", keys) // -0 and 0 one key
			}
			pr := prismtest.Run(t, p, 2*time.Minute)
			countedAsPerKey(t, pr, tc.last, parts, keys)
		})
	}
}

package step

import (
	"context"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/transforms/deadletter"
	"github.com/beamdedup/beamdedup/transforms/dedup/internal/core"
)

func TestCandidateCoder_RoundTrips(t *testing.T) {
	for _, c := range []candidate{
		{},
		{Retractions: 3},
		{Has: true, TS: -62135596800000, Row: []byte{1, 2, 3}, Rows: 7, Retractions: 2},
		{Has: true, Retract: true, TS: 5, Seq: []byte{}, Row: []byte{9}, Retractions: 1},
		{Has: true, TS: 5, Seq: []byte{0x80, 0, 1}, Row: []byte{9}, Rows: 2},
		{Has: true, TS: 5, Micros: 999, Seq: []byte{1}, Row: []byte{9}, Rows: 2},
	} {
		got, err := DecodeCandidate(EncodeCandidate(c))
		require.NoError(t, err)
		assert.Equal(t, c, got)
	}
	_, err := DecodeCandidate(nil)
	assert.Error(t, err)
}

// A runner may hold a streaming window's accumulators across an update, so
// every layout of the candidate ever written decodes: these bytes are the
// layouts before the microseconds (flags 1, 2, 4), with them (8) and with
// a timestamp for time (16). Never edit them.
func TestCandidateCoder_GoldenBytesDecode(t *testing.T) {
	for _, g := range []struct {
		hex  string
		want candidate
	}{
		{"030a04000103" + "09", candidate{Has: true, TS: 5, Rows: 2, Seq: []byte{3}, Row: []byte{9}}},
		{"050a0002" + "09", candidate{Has: true, Retract: true, TS: 5, Retractions: 1, Row: []byte{9}}},
		{"090a0400e707" + "09", candidate{Has: true, TS: 5, Rows: 2, Micros: 999, Row: []byte{9}}},
		{"150a0002" + "09", candidate{Has: true, Retract: true, Stamped: true, TS: 5, Retractions: 1, Row: []byte{9}}},
	} {
		b, err := hex.DecodeString(g.hex)
		require.NoError(t, err)
		got, err := DecodeCandidate(b)
		require.NoError(t, err)
		assert.Equal(t, g.want, got, g.hex)
		assert.Equal(t, g.hex, hex.EncodeToString(EncodeCandidate(g.want)), "and is what the coder writes")
	}
	_, err := DecodeCandidate([]byte{0x20, 0, 0, 0})
	assert.Error(t, err, "an unknown flag")
}

// KeyCandidates's in-bundle merge (Local) must give the combine what the
// per-row candidates would: the same merged candidate per key, whether the
// map flushes at the end of the bundle or keeps flushing because it is full.
// Many rows tie on time, so the encoding tie-break is exercised.
func TestKeyCandidates_InBundleMergeEqualsPerRowCandidates(t *testing.T) {
	for _, tc := range []struct {
		name string
		dir  core.Direction
		seq  string
	}{{"first", core.KeepFirst, ""}, {"last", core.KeepLast, ""}, {"first by sequence", core.KeepFirst, "seq"}, {"last by sequence", core.KeepLast, "seq"}} {
		t.Run(tc.name, func(t *testing.T) { testKeyCandidatesInBundleMerge(t, tc.dir, tc.seq) })
	}
}

func testKeyCandidatesInBundleMerge(t *testing.T, dir core.Direction, seqCol string) {
	type row struct {
		User string  `beam:"user"`
		Op   string  `beam:"op"`
		Val  int64   `beam:"val"`
		Seq  float64 `beam:"seq"`
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var rows []row
	var times []beam.EventTime
	for range 2000 {
		rows = append(rows, row{User: fmt.Sprint(rng.IntN(50)), Op: []string{"+I", "+U", "-U", "-D"}[rng.IntN(4)], Val: rng.Int64N(5), Seq: float64(rng.IntN(3)) - 1})
		times = append(times, beam.EventTime(rng.Int64N(4))) // many ties
	}
	merged := func(local bool, maxKeys int) map[string]candidate {
		f := &KeyCandidates{Rows: KeyRows{RowType: beam.EncodedType{T: reflect.TypeFor[row]()}, Columns: []string{"user"}, Checks: Columns{KindCol: "op", SeqCol: seqCol}, Metrics: "test"}, Local: local, Merge: BundleMerge{MaxKeys: maxKeys, Dir: dir}}
		require.NoError(t, f.Setup())
		got := map[string]candidate{}
		emit := func(_ beam.EventTime, k []byte, c candidate) {
			if old, ok := got[string(k)]; ok {
				c = dir.Merge(old, c)
			}
			got[string(k)] = c
		}
		dead := func(deadletter.DeadLetter) { t.Fatal("no row is invalid") }
		ctx := context.Background()
		drop := func(beam.EventTime, beam.T) { t.Fatal("nothing is dropped without OutputDropped") }
		f.StartBundle(ctx, emit, dead, drop)
		for i, r := range rows {
			require.NoError(t, f.ProcessElement(ctx, times[i], r, emit, dead, drop))
		}
		require.NoError(t, f.FinishBundle(ctx, emit, dead, drop))
		return got
	}
	want := merged(false, 0)
	require.Len(t, want, 50)
	for _, c := range want {
		require.Equal(t, seqCol != "", c.Seq != nil, "a candidate carries its sequence value")
	}
	assert.Equal(t, want, merged(true, 0), "flushed at the end of the bundle")
	assert.Equal(t, want, merged(true, 7), "flushed whenever 7 keys are held")
}

// The same for a KV input's candidates: keys of any type are encoded
// for the map, and the key emitted is the original.
func TestToCandidates_InBundleMergeEqualsPerRowCandidates(t *testing.T) {
	type row struct {
		Op  string `beam:"op"`
		Val int64  `beam:"val"`
	}
	rng := rand.New(rand.NewPCG(3, 4))
	type in struct {
		key int64
		row row
		ts  beam.EventTime
	}
	var ins []in
	for range 2000 {
		ins = append(ins, in{rng.Int64N(40), row{Op: []string{"+I", "+U", "-U", "-D"}[rng.IntN(4)], Val: rng.Int64N(5)}, beam.EventTime(rng.Int64N(4))})
	}
	merged := func(local bool, maxKeys int) map[int64]candidate {
		f := &ToCandidate{ValueType: beam.EncodedType{T: reflect.TypeFor[row]()}, KeyType: beam.EncodedType{T: reflect.TypeFor[int64]()}, Checks: Columns{KindCol: "op"}, Local: local, Merge: BundleMerge{MaxKeys: maxKeys}}
		require.NoError(t, f.Setup())
		got := map[int64]candidate{}
		emit := func(_ beam.EventTime, k beam.T, c candidate) {
			key := k.(int64)
			if old, ok := got[key]; ok {
				c = core.KeepFirst.Merge(old, c)
			}
			got[key] = c
		}
		drop := func(beam.EventTime, beam.T, beam.V) { t.Fatal("nothing is dropped without OutputDropped") }
		f.StartBundle(emit, drop)
		for _, x := range ins {
			require.NoError(t, f.ProcessElement(x.ts, x.key, x.row, emit, drop))
		}
		require.NoError(t, f.FinishBundle(emit, drop))
		return got
	}
	want := merged(false, 0)
	require.Len(t, want, 40)
	assert.Equal(t, want, merged(true, 0), "flushed at the end of the bundle")
	assert.Equal(t, want, merged(true, 7), "flushed whenever 7 keys are held")
}

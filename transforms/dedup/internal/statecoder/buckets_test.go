package statecoder

import (
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Golden bytes of format 5, a bucket's segment: state written by released
// versions must stay readable, so never edit these; add a format instead.
var goldenSegment = struct {
	pos     uint64
	buckets int
	entries []Entry
	hex     string
}{
	pos: 3, buckets: 128,
	entries: []Entry{
		{Key: []byte("a"), State: Encode(&State{Phase: Emitted})},
		{Key: []byte("b"), State: Encode(&State{Phase: Pending, CandTime: 60_000, Cand: []byte("row")}), Timer: FinalizeTimer, At: 60_000},
		{Key: []byte("c"), State: Encode(&State{Phase: Emitted, ExpireAt: 5}), Timer: CleanupTimer, At: 5},
		{Key: []byte("d")}, // deleted
	},
	hex: "03058001" + "0161" + "03010200" + "00" +
		"0162" + "0a010124c0a90703726f77" + "01c0a907" +
		"0163" + "040102010a" + "020a" +
		"0164" + "00" + "00",
}

func TestGoldenBytesOfABucketSegment(t *testing.T) {
	g := goldenSegment
	seg := AppendSegmentHeader(nil, g.pos, g.buckets)
	for i := range g.entries {
		seg = AppendEntry(seg, &g.entries[i])
	}
	assert.Equal(t, g.hex, hex.EncodeToString(seg))

	b, err := hex.DecodeString(g.hex)
	require.NoError(t, err)
	var got []Entry
	held, err := FoldSegments([][]byte{b}, g.buckets, func(e *Entry) { got = append(got, *e) })
	require.NoError(t, err)
	assert.Equal(t, Held{Segments: 1, Next: 4, Delta: len(b)}, held)
	require.Len(t, got, len(g.entries))
	for i, e := range g.entries {
		assert.Equal(t, string(e.Key), string(got[i].Key))
		assert.Equal(t, hex.EncodeToString(e.State), hex.EncodeToString(got[i].State))
		assert.Equal(t, e.Timer, got[i].Timer)
		assert.Equal(t, e.At, got[i].At)
	}
}

// A bucket's segments fold in position order, whatever their order in the
// bag: a key's entry of the largest position is its current one.
func TestFoldSegments_TheLargestPositionIsCurrentInAnyOrder(t *testing.T) {
	seg := func(pos uint64, e Entry) []byte { return AppendEntry(AppendSegmentHeader(nil, pos, 4), &e) }
	first := Encode(&State{Phase: Emitted, ExpireAt: 1})
	later := Encode(&State{Phase: Emitted, ExpireAt: 2})
	segs := [][]byte{seg(2, Entry{Key: []byte("k"), State: later}), seg(0, Entry{Key: []byte("k"), State: first}), seg(1, Entry{Key: []byte("k")})}
	var states [][]byte
	held, err := FoldSegments(segs, 4, func(e *Entry) { states = append(states, e.State) })
	require.NoError(t, err)
	assert.Equal(t, [][]byte{first, {}, later}, states)
	assert.Equal(t, uint64(3), held.Next)
	assert.Equal(t, len(segs[1]), held.Base)
	assert.Equal(t, len(segs[0])+len(segs[2]), held.Delta)
}

// A write too large for one segment is several at one position: their
// entries are all current, in whichever order the bag holds the segments.
func TestFoldSegments_SegmentsOfOnePositionAreOneWrite(t *testing.T) {
	seg := func(pos uint64, es ...Entry) []byte {
		b := AppendSegmentHeader(nil, pos, 4)
		for i := range es {
			b = AppendEntry(b, &es[i])
		}
		return b
	}
	old := Encode(&State{Phase: Emitted, ExpireAt: 1})
	later := Encode(&State{Phase: Emitted, ExpireAt: 2})
	base := seg(0, Entry{Key: []byte("a"), State: old}, Entry{Key: []byte("b"), State: old}, Entry{Key: []byte("c"), State: old})
	first := seg(1, Entry{Key: []byte("a"), State: later})
	second := seg(1, Entry{Key: []byte("b")}, Entry{Key: []byte("d"), State: later})
	for _, segs := range [][][]byte{{base, first, second}, {second, first, base}, {first, base, second}} {
		current := map[string]string{}
		held, err := FoldSegments(segs, 4, func(e *Entry) {
			if len(e.State) == 0 {
				delete(current, string(e.Key))
				return
			}
			current[string(e.Key)] = hex.EncodeToString(e.State)
		})
		require.NoError(t, err)
		assert.Equal(t, map[string]string{"a": hex.EncodeToString(later), "c": hex.EncodeToString(old), "d": hex.EncodeToString(later)}, current)
		assert.Equal(t, Held{Segments: 3, Next: 2, Base: len(base), Delta: len(first) + len(second)}, held)
	}
}

// State written with another bucket count is refused, not misread: its
// keys' buckets are other ones.
func TestFoldSegments_RefusesAnotherBucketCount(t *testing.T) {
	seg := AppendEntry(AppendSegmentHeader(nil, 0, 64), &Entry{Key: []byte("k"), State: Encode(&State{Phase: Emitted})})
	_, err := FoldSegments([][]byte{seg}, 128, func(*Entry) {})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "written with its keys in 64 buckets, and this step has 128")
}

// Bytes no version wrote are an error, never a state.
func TestFoldSegments_RefusesCorruptSegments(t *testing.T) {
	good := AppendEntry(AppendSegmentHeader(nil, 0, 4), &Entry{Key: []byte("k"), State: Encode(&State{Phase: Emitted}), Timer: CleanupTimer, At: 9})
	for name, seg := range map[string][]byte{
		"empty":                    {},
		"another format":           {0, 6, 4},
		"truncated entry":          good[:len(good)-2],
		"a timer of no kind":       append(AppendEntry(AppendSegmentHeader(nil, 0, 4), &Entry{Key: []byte("k"), State: Encode(&State{Phase: Emitted})})[:9], 7),
		"a timer on a deleted key": {0, 5, 4, 1, 'k', 0, 2, 0},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := FoldSegments([][]byte{seg}, 4, func(*Entry) {})
			assert.ErrorIs(t, err, ErrCorrupt)
		})
	}
}

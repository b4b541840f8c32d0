package statecoder

import (
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// beamVarint is a mark as Beam writes it into a Bag[int64]: the varint of
// its two's complement (coder.EncodeVarInt), one write.
func beamVarint(m int64) string { return hex.EncodeToString(binary.AppendUvarint(nil, uint64(m))) }

// Golden marks of version 3, as int64s and as the bytes on the wire. State
// written by released versions must stay readable: never edit these, add a
// tag instead.
var goldenMarks = []struct {
	name  string
	st    State
	marks []int64
	wire  []string
}{
	{"seen marker without TTL", State{Phase: Emitted}, []int64{0}, []string{"00"}},
	{"seen marker with expiry", State{Phase: Emitted, ExpireAt: 1_700_000_300_000}, []int64{13_600_002_400_001}, []string{"81bebffae78b03"}},
	{"seen marker with event-time retention", State{Phase: Emitted, MaxEvent: 1_700_000_000_000}, []int64{13_600_000_000_002}, []string{"8280adf9e78b03"}},
	{"both retentions, one before 1970", State{Phase: Emitted, ExpireAt: 5, MaxEvent: -2}, []int64{41, -14}, []string{"29", "f2ffffffffffffffff01"}},
}

func TestGoldenMarksOfVersion3(t *testing.T) {
	for _, g := range goldenMarks {
		t.Run(g.name, func(t *testing.T) {
			marks, err := Marks(&g.st)
			require.NoError(t, err)
			assert.Equal(t, g.marks, marks)
			var wire []string
			for _, m := range marks {
				wire = append(wire, beamVarint(m))
			}
			assert.Equal(t, g.wire, wire)
			st, err := FoldMarks(g.marks)
			require.NoError(t, err)
			assert.Equal(t, g.st, st)
		})
	}
}

func TestFoldMarksRejectsUnknownMarks(t *testing.T) {
	for _, m := range [][]int64{{markReserved}, {0, 7}, {4 << markTagBits}} {
		_, err := FoldMarks(m)
		assert.ErrorIs(t, err, ErrCorrupt, "%v", m)
	}
}

func TestMarksSayTheSameInAnyOrder(t *testing.T) {
	marks := []int64{1<<markTagBits | markExpireAt, 9<<markTagBits | markExpireAt, markSeen, 4<<markTagBits | markMaxEvent, -3<<markTagBits | markMaxEvent}
	want := State{Phase: Emitted, ExpireAt: 9, MaxEvent: 4}
	rng := rand.New(rand.NewPCG(1, 1))
	for range 20 {
		rng.Shuffle(len(marks), func(i, j int) { marks[i], marks[j] = marks[j], marks[i] })
		st, err := FoldMarks(marks)
		require.NoError(t, err)
		assert.Equal(t, want, st)
	}
}

func TestNoMarksFoldToTheAbsentState(t *testing.T) {
	st, err := FoldMarks(nil)
	require.NoError(t, err)
	assert.Equal(t, State{}, st)
	marks, err := Marks(&State{})
	require.NoError(t, err)
	assert.Empty(t, marks)
}

func TestMarksRefuseWhatTheyCannotSay(t *testing.T) {
	for _, st := range []State{
		{Phase: Pending, CandTime: 1},
		{Phase: Emitted, CandTime: 1},
		{Phase: Emitted, Cand: []byte("row")},
		{Phase: Emitted, ExpireAt: 1 << 62},
	} {
		_, err := Marks(&st)
		assert.Error(t, err, "%+v", st)
	}
}

func TestMarkChanges_ANewKeyIsOneMarkAndARefreshOneMore(t *testing.T) {
	for _, tc := range []struct {
		name       string
		old, new   State
		clear      bool
		marksAdded int
	}{
		{"new key", State{}, State{Phase: Emitted}, false, 1},
		{"new key with expiry", State{}, State{Phase: Emitted, ExpireAt: 9}, false, 1},
		{"new key with both retentions", State{}, State{Phase: Emitted, ExpireAt: 9, MaxEvent: 3}, false, 2},
		{"refreshed expiry", State{Phase: Emitted, ExpireAt: 9}, State{Phase: Emitted, ExpireAt: 19}, false, 1},
		{"refreshed largest event time", State{Phase: Emitted, ExpireAt: 9, MaxEvent: 3}, State{Phase: Emitted, ExpireAt: 9, MaxEvent: 5}, false, 1},
		{"a new period with a smaller largest event time rewrites", State{Phase: Emitted, ExpireAt: 9, MaxEvent: 5}, State{Phase: Emitted, ExpireAt: 30, MaxEvent: 2}, true, 2},
		{"expired", State{Phase: Emitted, ExpireAt: 9}, State{}, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stored, err := Marks(&tc.old)
			require.NoError(t, err)
			clear, add, err := MarkChanges(stored, &tc.old, &tc.new)
			require.NoError(t, err)
			assert.Equal(t, tc.clear, clear)
			assert.Len(t, add, tc.marksAdded)
		})
	}
}

// Whatever the change, the stored marks after it fold to the new state and
// never exceed MaxMarks.
func TestMarkChanges_StoredMarksAlwaysFoldToTheNewState(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 9))
	small := func() int64 { return rng.Int64N(7) - 2 }
	var stored []int64
	var st State
	for i := range 20_000 {
		next := st
		switch rng.IntN(5) {
		case 0:
			next = State{}
		case 1:
			next = State{Phase: Emitted}
		case 2:
			next.Phase, next.ExpireAt = Emitted, small()
		case 3:
			next.Phase, next.MaxEvent = Emitted, small()
		case 4:
			next.Phase, next.ExpireAt = Emitted, next.ExpireAt+rng.Int64N(3)
		}
		clear, add, err := MarkChanges(stored, &st, &next)
		require.NoError(t, err)
		if clear {
			stored = nil
		}
		stored = append(stored, add...)
		require.LessOrEqual(t, len(stored), MaxMarks, "step %d", i)
		folded, err := FoldMarks(stored)
		require.NoError(t, err)
		require.Equal(t, next, folded, "step %d: %+v -> %+v via %v", i, st, next, add)
		st = next
	}
}

func TestVersionChanges_AppendUntilFullThenRewrite(t *testing.T) {
	st := State{Phase: Emitted, CandTime: 3, Cand: []byte("row")}
	var versions [][]byte
	for i := range 2*MaxVersions + 1 {
		clear, add := VersionChanges(len(versions), &st)
		assert.Equal(t, i > 0 && i%MaxVersions == 0, clear, "write %d", i)
		if clear {
			versions = nil
		}
		versions = append(versions, add)
		require.LessOrEqual(t, len(versions), MaxVersions)
		got, err := LastVersion(versions)
		require.NoError(t, err)
		assert.True(t, got.Equal(&st))
		st.CandTime++
	}
	clear, add := VersionChanges(len(versions), &State{})
	assert.True(t, clear)
	assert.Nil(t, add)
	clear, _ = VersionChanges(0, &State{})
	assert.False(t, clear, "nothing stored, nothing to clear")
	got, err := LastVersion(nil)
	require.NoError(t, err)
	assert.Equal(t, State{}, got)
}

func TestVersionsSayTheSameInAnyOrder(t *testing.T) {
	var versions [][]byte
	var want State
	for i := range 5 {
		want = State{Phase: Emitted, CandTime: int64(i), Cand: []byte{byte('a' + i)}}
		_, add := VersionChanges(len(versions), &want)
		versions = append(versions, add)
	}
	rng := rand.New(rand.NewPCG(2, 2))
	for range 20 {
		rng.Shuffle(len(versions), func(i, j int) { versions[i], versions[j] = versions[j], versions[i] })
		got, err := LastVersion(versions)
		require.NoError(t, err)
		assert.True(t, got.Equal(&want), "%+v", got)
	}
}

// Golden bytes of a version: its position, then the state's version-1 or
// version-2 bytes. Never edit these.
func TestGoldenVersions(t *testing.T) {
	_, first := VersionChanges(0, &State{Phase: Emitted, CandTime: 60_000, Cand: []byte("row")})
	assert.Equal(t, "00010224c0a90703726f77", hex.EncodeToString(first))
	_, third := VersionChanges(2, &State{Phase: Emitted, CandTime: 60_000, Cand: []byte("row"), Seq: []byte{0x80, 0, 7}})
	assert.Equal(t, "02020264c0a90703726f7703800007", hex.EncodeToString(third))
	_, err := LastVersion([][]byte{{}})
	assert.ErrorIs(t, err, ErrCorrupt)
}

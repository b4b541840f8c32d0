package statecoder

import (
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Golden bytes of version 1. State written by released versions must stay
// readable: never edit these, add a new version instead.
var golden = []struct {
	name string
	st   State
	hex  string
}{
	{"absent", State{}, "010000"},
	{"seen marker without TTL", State{Phase: Emitted}, "010200"},
	{"seen marker with expiry", State{Phase: Emitted, ExpireAt: 1_700_000_300_000, MaxEvent: 1_700_000_000_000}, "010203c0efcffef96280a0abfef962"},
	{"pending candidate", State{Phase: Pending, CandTime: 60_000, MaxEvent: 60_000, Cand: []byte("row")}, "010126c0a907c0a90703726f77"},
	{"emitted with cleanup re-arm", State{Phase: Emitted, ExpireAt: 5, MaxEvent: -2, CandTime: 7, CleanupAt: 9, Rearms: 3}, "01021f0a030e1203"},
}

func TestGoldenBytesOfVersion1(t *testing.T) { checkGolden(t, golden) }

// Golden bytes of version 2 (KeepLast with SequenceBy): a stored row, its
// SequenceBy value and its expiry. Never edit these either.
var goldenV2 = []struct {
	name string
	st   State
	hex  string
}{
	{"last row with sequence", State{Phase: Emitted, CandTime: 60_000, Cand: []byte("row"), Seq: []byte{0x80, 0, 7}}, "020264c0a90703726f7703800007"},
	{"last row with sequence and expiry", State{Phase: Emitted, ExpireAt: 5, MaxEvent: 1, CandTime: 1, Cand: []byte("r"), Seq: []byte("s")}, "0202670a020201720173"},
}

func TestGoldenBytesOfVersion2(t *testing.T) { checkGolden(t, goldenV2) }

// checkGolden checks that each state encodes to its golden bytes and they
// decode to it.
func checkGolden(t *testing.T, golden []struct {
	name string
	st   State
	hex  string
}) {
	for _, g := range golden {
		t.Run(g.name, func(t *testing.T) {
			assert.Equal(t, g.hex, hex.EncodeToString(Encode(&g.st)))
			b, err := hex.DecodeString(g.hex)
			require.NoError(t, err)
			var st State
			require.NoError(t, Decode(b, &st))
			assert.Equal(t, g.st, st)
		})
	}
}

// Golden bytes of version 4 (a time to the microsecond): event-time
// KeepFirst's pending candidate and KeepLast's stored row of a time.Time
// OnTime column, with and without a SequenceBy value. Never edit these.
var goldenV4 = []struct {
	name string
	st   State
	hex  string
}{
	{"pending candidate 250 µs past its millisecond", State{Phase: Pending, CandTime: 60_000, Micros: 250, Cand: []byte("row")}, "0401a4c0a907fa0103726f77"},
	{"last row with sequence and microseconds", State{Phase: Emitted, CandTime: 1, Micros: 999, Cand: []byte("r"), Seq: []byte("s"), ExpireAt: 5}, "0402e50a02e707017201" + "73"},
	{"tombstone at 1 µs past", State{Phase: Emitted, CandTime: -1, Micros: 1}, "0402840101"},
}

func TestGoldenBytesOfVersion4(t *testing.T) { checkGolden(t, goldenV4) }

// Version 4 is written only for a time with microseconds: every state of
// the earlier versions (whose times are whole milliseconds) keeps its
// bytes, and decodes with Micros 0.
func TestOnlyATimeWithMicrosecondsIsWrittenAsVersion4(t *testing.T) {
	for _, g := range append(golden, goldenV2...) {
		assert.Zero(t, g.st.Micros, g.name)
		assert.NotEqual(t, byte(4), Encode(&g.st)[0], g.name)
	}
	st := State{Phase: Pending, CandTime: 3, Micros: 1}
	assert.Equal(t, byte(4), Encode(&st)[0])
}

// KeepLast without SequenceBy stores its last row in version 1.
func TestStateWithoutSequenceIsWrittenAsVersion1(t *testing.T) {
	st := State{Phase: Emitted, CandTime: 3, Cand: []byte("row")}
	assert.Equal(t, byte(1), Encode(&st)[0])
}

func TestDecodeRejectsCorruptState(t *testing.T) {
	for _, tc := range []struct{ name, hex string }{
		{"unknown version", "030200"},
		{"sequence flag in version 1", "010240017a"},
		{"microseconds flag in version 2", "02028001"},
		{"microseconds past 999", "040180e807"},
		{"truncated header", "0102"},
		{"unknown phase", "010900"},
		{"unknown flag", "010280"},
		{"truncated varint", "010201"},
		{"candidate longer than input", "0101200a72"},
		{"trailing bytes", "01020000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := hex.DecodeString(tc.hex)
			require.NoError(t, err)
			var st State
			assert.ErrorIs(t, Decode(b, &st), ErrCorrupt)
		})
	}
}

func TestEmptyBytesDecodeToAbsentState(t *testing.T) {
	st := State{Phase: Emitted, ExpireAt: 1}
	require.NoError(t, Decode(nil, &st))
	assert.Equal(t, State{}, st)
}

func FuzzRoundTrip(f *testing.F) {
	f.Add(uint8(2), int64(1), int64(2), int64(3), int64(4), uint8(5), uint16(6), []byte("x"), []byte("s"))
	f.Fuzz(func(t *testing.T, phase uint8, exp, maxEv, cand, clean int64, rearms uint8, micros uint16, row, seq []byte) {
		st := State{Phase: Phase(phase % 3), ExpireAt: exp, MaxEvent: maxEv, CandTime: cand, CleanupAt: clean, Rearms: rearms, Micros: micros % 1000, Cand: row, Seq: seq}
		if len(st.Cand) == 0 {
			st.Cand = nil
		}
		if len(st.Seq) == 0 {
			st.Seq = nil
		}
		var got State
		require.NoError(t, Decode(Encode(&st), &got))
		if len(got.Cand) == 0 {
			got.Cand = nil
		}
		if len(got.Seq) == 0 {
			got.Seq = nil
		}
		assert.Equal(t, st, got)
	})
}

func BenchmarkEncodeSeenMarkerWithExpiry(b *testing.B) {
	st := State{Phase: Emitted, ExpireAt: 1_700_000_300_000, MaxEvent: 1_700_000_000_000}
	buf := make([]byte, 0, 64)
	b.ReportAllocs()
	for b.Loop() {
		buf = Append(buf[:0], &st)
	}
	b.ReportMetric(float64(len(buf)), "bytes/key")
}

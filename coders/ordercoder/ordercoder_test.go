package ordercoder

import (
	"bytes"
	"cmp"
	"encoding/hex"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// Golden bytes of version 1: the encoding is persisted in state, never edit
// these.
func TestGoldenBytesOfVersion1(t *testing.T) {
	for _, g := range []struct {
		name string
		got  []byte
		hex  string
	}{
		{"int 0", Int(nil, 0), "8000000000000000"},
		{"int -1", Int(nil, -1), "7fffffffffffffff"},
		{"int min", Int(nil, math.MinInt64), "0000000000000000"},
		{"uint 258", Uint(nil, 258), "0000000000000102"},
		{"float 1", Float(nil, 1), "bff0000000000000"},
		{"float -1", Float(nil, -1), "400fffffffffffff"},
		{"float 0", Float(nil, 0), "8000000000000000"},
		{"float -0", Float(nil, math.Copysign(0, -1)), "8000000000000000"},
		{"float NaN", Float(nil, math.NaN()), "fff8000000000001"},
		{"float +Inf", Float(nil, math.Inf(1)), "fff0000000000000"},
		{"time", Time(nil, time.Date(2024, 1, 1, 0, 0, 0, 5, time.UTC)), "800000006592008000000005"},
		{"string", String(nil, "ab"), "6162"},
	} {
		t.Run(g.name, func(t *testing.T) { assert.Equal(t, g.hex, hex.EncodeToString(g.got)) })
	}
}

func TestEqualInstantsInOtherZonesEncodeEqually(t *testing.T) {
	u := time.Date(2024, 1, 1, 12, 0, 0, 0, time.UTC)
	assert.Equal(t, Time(nil, u), Time(nil, u.In(time.FixedZone("x", 3600))))
}

func TestAllNaNsAreEqualAndAboveInfinity(t *testing.T) {
	other := math.Float64frombits(0xfff0000000000abc) // a negative NaN payload
	assert.Equal(t, Float(nil, math.NaN()), Float(nil, other))
	assert.Equal(t, 1, bytes.Compare(Float(nil, math.NaN()), Float(nil, math.Inf(1))))
}

// sign maps a comparison to -1, 0 or 1.
func sign(c int) int { return cmp.Compare(c, 0) }

func FuzzIntByteOrderIsValueOrder(f *testing.F) {
	f.Add(int64(-1), int64(1))
	f.Fuzz(func(t *testing.T, a, b int64) {
		assert.Equal(t, cmp.Compare(a, b), sign(bytes.Compare(Int(nil, a), Int(nil, b))))
	})
}

func FuzzUintByteOrderIsValueOrder(f *testing.F) {
	f.Add(uint64(1), uint64(1<<63))
	f.Fuzz(func(t *testing.T, a, b uint64) {
		assert.Equal(t, cmp.Compare(a, b), sign(bytes.Compare(Uint(nil, a), Uint(nil, b))))
	})
}

// floatCmp is the documented order: -0 = 0, NaNs equal and largest.
func floatCmp(a, b float64) int {
	switch an, bn := math.IsNaN(a), math.IsNaN(b); {
	case an && bn:
		return 0
	case an:
		return 1
	case bn:
		return -1
	}
	return cmp.Compare(a, b) // cmp.Compare treats -0 == 0
}

func FuzzFloatByteOrderIsValueOrder(f *testing.F) {
	f.Add(uint64(0), uint64(1<<63))                               // 0, -0
	f.Add(uint64(0x7ff8000000000000), uint64(0xfff0000000000000)) // NaN, -Inf
	f.Add(math.Float64bits(-1.5), math.Float64bits(2.25))
	f.Fuzz(func(t *testing.T, ab, bb uint64) {
		a, b := math.Float64frombits(ab), math.Float64frombits(bb)
		assert.Equal(t, floatCmp(a, b), sign(bytes.Compare(Float(nil, a), Float(nil, b))), "%v vs %v", a, b)
	})
}

func FuzzTimeByteOrderIsValueOrder(f *testing.F) {
	f.Add(int64(-1), uint32(999_999_999), int64(0), uint32(0))
	f.Fuzz(func(t *testing.T, as int64, an uint32, bs int64, bn uint32) {
		a, b := time.Unix(as, int64(an%1e9)), time.Unix(bs, int64(bn%1e9))
		assert.Equal(t, a.Compare(b), sign(bytes.Compare(Time(nil, a), Time(nil, b))))
	})
}

func FuzzStringByteOrderIsValueOrder(f *testing.F) {
	f.Add("a", "ab")
	f.Fuzz(func(t *testing.T, a, b string) {
		assert.Equal(t, cmp.Compare(a, b), sign(bytes.Compare(String(nil, a), String(nil, b))))
	})
}

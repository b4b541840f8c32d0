package keycoder

import (
	"bytes"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type fuzzRow struct {
	S   string `beam:"s"`
	B   []byte
	PS  *string
	I   int64
	PI  *int32
	U   uint8
	F   float64
	PF  *float32
	PB  *bool
	T   time.Time
	PT  *time.Time
	Ign map[string]int `beam:"-"`
}

var fuzzCols = []string{"s", "B", "PS", "I", "PI", "U", "F", "PF", "PB", "T", "PT"}

// fuzzEqual is the reference GROUP BY equality, written from the rules
// rather than from the encoder.
func fuzzEqual(a, b fuzzRow) bool {
	f64 := func(x, y float64) bool { return x == y || (math.IsNaN(x) && math.IsNaN(y)) }
	f32 := func(x, y float32) bool { return f64(float64(x), float64(y)) }
	return a.S == b.S &&
		bytes.Equal(a.B, b.B) &&
		ptrEqual(a.PS, b.PS, func(x, y string) bool { return x == y }) &&
		a.I == b.I &&
		ptrEqual(a.PI, b.PI, func(x, y int32) bool { return x == y }) &&
		a.U == b.U &&
		f64(a.F, b.F) &&
		ptrEqual(a.PF, b.PF, f32) &&
		ptrEqual(a.PB, b.PB, func(x, y bool) bool { return x == y }) &&
		a.T.Equal(b.T) &&
		ptrEqual(a.PT, b.PT, time.Time.Equal)
}

func ptrEqual[T any](a, b *T, eq func(T, T) bool) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return eq(*a, *b)
}

var fuzzZones = []*time.Location{time.UTC, time.FixedZone("A", 3600), time.FixedZone("B", -9*3600-1800)}

// fuzzInput is one generated row; mask bits choose NULLs, the bool value,
// and time zones.
type fuzzInput struct {
	s    string
	b    []byte
	i    int64
	f    uint64 // float64 bits, so every NaN payload and -0 is reachable
	g    uint32 // float32 bits
	sec  int64
	nsec uint32
	mask uint16
}

func (in fuzzInput) row() fuzzRow {
	r := fuzzRow{
		S: in.s, B: in.b, I: in.i, U: uint8(in.i),
		F: math.Float64frombits(in.f),
		T: time.Unix(in.sec, int64(in.nsec%1e9)).In(fuzzZones[int(in.mask>>8)%len(fuzzZones)]),
	}
	if in.mask&1 != 0 {
		r.PS = ptr(string(in.b))
	}
	if in.mask&2 != 0 {
		r.PI = ptr(int32(in.i >> 8))
	}
	if in.mask&4 != 0 {
		r.PF = ptr(math.Float32frombits(in.g))
	}
	if in.mask&8 != 0 {
		r.PB = ptr(in.mask&16 != 0)
	}
	if in.mask&32 != 0 {
		r.PT = ptr(time.Unix(in.sec>>1, int64(in.nsec%1e9)).In(fuzzZones[int(in.mask>>12)%len(fuzzZones)]))
	}
	return r
}

// equivalent returns a row equal to r under the rules but different in
// representation: other locations, fresh pointers, nil vs empty bytes,
// other zero sign and NaN payloads.
func equivalent(r fuzzRow) fuzzRow {
	c := r
	if len(r.B) == 0 {
		if r.B == nil {
			c.B = []byte{}
		} else {
			c.B = nil
		}
	} else {
		c.B = bytes.Clone(r.B)
	}
	switch {
	case math.IsNaN(r.F):
		c.F = math.Float64frombits(math.Float64bits(r.F) ^ 0x8000000000000001 | 0x7ff0000000000000)
		if !math.IsNaN(c.F) { // flipping the low bit of a payload-1 NaN can make Inf
			c.F = math.NaN()
		}
	case r.F == 0:
		c.F = -r.F
	}
	if r.PS != nil {
		c.PS = ptr(*r.PS)
	}
	if r.PI != nil {
		c.PI = ptr(*r.PI)
	}
	if r.PF != nil {
		v := *r.PF
		if v == 0 {
			v = -v
		} else if v != v {
			v = math.Float32frombits(0xffc00123)
		}
		c.PF = &v
	}
	if r.PB != nil {
		c.PB = ptr(*r.PB)
	}
	c.T = r.T.In(fuzzZones[1])
	if r.PT != nil {
		c.PT = ptr(r.PT.In(fuzzZones[2]))
	}
	c.Ign = map[string]int{"not a key": 1}
	return c
}

func FuzzEncode_EqualBytesIffEqualKeys(f *testing.F) {
	e, err := New(reflect.TypeFor[fuzzRow](), fuzzCols)
	require.NoError(f, err)

	nan := math.Float64bits(math.NaN())
	negZero := math.Float64bits(math.Copysign(0, -1))
	// Seeds: identical pairs, pairs equal only under the rules, and
	// near-miss pairs the fuzzer can mutate from.
	f.Add("ab", "a", []byte("c"), []byte("bc"), int64(1), int64(1), nan, uint64(0x7ff0000000000001),
		uint32(0x7fc00000), uint32(0xff800001), int64(0), int64(0), uint32(5), uint32(5), uint16(0xffff), uint16(0xffff))
	f.Add("", "", []byte(nil), []byte{}, int64(0), int64(0), negZero, uint64(0),
		uint32(0x80000000), uint32(0), int64(-1), int64(-1), uint32(0), uint32(0), uint16(0x0100), uint16(0x0204))
	f.Add("x", "x", []byte("x"), []byte("x"), int64(-5), int64(-5), uint64(1), uint64(1),
		uint32(1), uint32(1), int64(1e9), int64(1e9), uint32(999999999), uint32(999999999), uint16(0x2f), uint16(0x0f))
	f.Add("", "", []byte{}, []byte{}, int64(0), int64(0), uint64(0), uint64(0),
		uint32(0), uint32(0), int64(0), int64(0), uint32(0), uint32(0), uint16(0), uint16(1))

	f.Fuzz(func(t *testing.T, s1, s2 string, b1, b2 []byte, i1, i2 int64, f1, f2 uint64,
		g1, g2 uint32, sec1, sec2 int64, ns1, ns2 uint32, m1, m2 uint16) {
		a := fuzzInput{s1, b1, i1, f1, g1, sec1, ns1, m1}.row()
		b := fuzzInput{s2, b2, i2, f2, g2, sec2, ns2, m2}.row()

		ka, kb := e.Encode(a), e.Encode(b)
		assert.Equal(t, fuzzEqual(a, b), bytes.Equal(ka, kb), "rows %+v and %+v encode to %x and %x", a, b, ka, kb)

		eq := equivalent(a)
		require.True(t, fuzzEqual(a, eq), "test bug: equivalent row is not equal")
		assert.Equal(t, ka, e.Encode(eq), "equivalent rows %+v and %+v", a, eq)
		assert.Equal(t, ka, e.Append(nil, reflect.ValueOf(&a)), "pointer row encodes differently")
	})
}

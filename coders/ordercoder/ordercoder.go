// Package ordercoder encodes an ordering value (a SequenceBy column) into
// bytes whose lexicographic order (bytes.Compare) is the value's order, so
// that a merge or a state can compare values of any supported type as
// bytes, without knowing the type.
//
// # Format, version 1
//
// Values of one column have one type, so no type tag is written; bytes of
// different types must not be compared.
//
//   - signed integers: int64 with its sign bit flipped, 8 bytes big-endian
//   - unsigned integers: uint64, 8 bytes big-endian
//   - floats (float32 widened to float64): the IEEE bits, with the sign bit
//     flipped for a positive number and every bit flipped for a negative
//     one, 8 bytes big-endian. -0 is encoded as 0 (they are equal). Every
//     NaN is encoded as one canonical NaN that sorts above +Inf: NaNs are
//     equal to each other and larger than every number.
//   - time.Time: Unix seconds as a sign-flipped int64 (8 bytes) then the
//     nanoseconds within the second as uint32 (4 bytes), big-endian. Equal
//     instants (t1.Equal(t2)) encode equally; location is ignored. (A
//     SequenceBy column's times are truncated to the microsecond before
//     they are encoded, as rowspec.SequenceBy says.)
//   - string: its bytes (Go's string order is byte order).
//
// The bytes are persisted in dedup state: the golden tests pin them.
package ordercoder

import (
	"encoding/binary"
	"math"
	"time"
)

// Int appends the encoding of a signed integer.
func Int(dst []byte, v int64) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(v)^(1<<63))
}

// Uint appends the encoding of an unsigned integer.
func Uint(dst []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(dst, v) }

// canonicalNaN is the bit pattern every NaN is encoded from.
const canonicalNaN = 0x7ff8000000000001

// Float appends the encoding of a float.
func Float(dst []byte, v float64) []byte {
	var bits uint64
	switch {
	case math.IsNaN(v):
		bits = canonicalNaN // above +Inf (0x7ff0...) once the sign bit is flipped
	case v == 0:
		bits = 0 // -0 is 0
	default:
		bits = math.Float64bits(v)
	}
	if bits&(1<<63) != 0 {
		bits = ^bits // negative: larger magnitude sorts lower
	} else {
		bits ^= 1 << 63
	}
	return binary.BigEndian.AppendUint64(dst, bits)
}

// Time appends the encoding of an instant.
func Time(dst []byte, t time.Time) []byte {
	dst = Int(dst, t.Unix())
	return binary.BigEndian.AppendUint32(dst, uint32(t.Nanosecond()))
}

// String appends the encoding of a string.
func String(dst []byte, s string) []byte { return append(dst, s...) }

// Package keycoder encodes the PARTITION BY key columns of a Go struct row
// into bytes that are deterministic and injective: two keys encode to equal
// bytes exactly when they are equal under GROUP BY semantics. The bytes are
// used as Beam state keys, so they are persisted across pipeline updates.
//
// # Columns
//
// The columns of a row type are its exported top-level fields, in field
// order. A column is named by the part of its `beam:"name"` tag before any
// comma, or by the Go field name when the tag is absent or has an empty name.
// A tag of `beam:"-"` excludes the field. Fields of embedded structs are not
// promoted: an embedded struct is a single (unsupported) column.
//
// # Key column types and equality
//
//   - string, []byte (any slice of a uint8-kind element), bool,
//     int/int8/16/32/64, uint/uint8/16/32/64, float32/float64, time.Time, and
//     one level of pointer to any of these. Named types are supported by their
//     underlying kind (type ID int64), except types derived from time.Time,
//     which is matched by exact type.
//   - A nil pointer is NULL. NULLs equal each other and differ from every
//     non-NULL value, including "", 0 and false.
//   - A nil []byte is NOT NULL: it equals an empty []byte. Use *[]byte for a
//     nullable byte column.
//   - Floats: -0 equals 0 and all NaNs are equal (see CanonicalFloat64).
//   - time.Time values are equal iff t1.Equal(t2): location and monotonic
//     reading are ignored.
//
// # Format, version 1 (formatVersion)
//
// A key is the concatenation of its columns' encodings in the order the
// columns were given to New; zero columns give the empty key. Every column
// encoding is prefix-free for its fixed column type, which makes the
// concatenation injective ("ab","c" differs from "a","bc").
//
//   - pointer: 0x00 for NULL, else 0x01 followed by the pointee's encoding
//   - string, []byte: uvarint(len) followed by the bytes
//   - bool: 0x00 or 0x01
//   - signed integers: int64 two's complement, 8 bytes big-endian
//   - unsigned integers: uint64, 8 bytes big-endian
//   - float64: IEEE bits of the canonical value, 8 bytes big-endian
//   - float32: IEEE bits of the canonical value, 4 bytes big-endian
//   - time.Time: Unix seconds as int64 (8 bytes big-endian) followed by
//     nanoseconds within the second as uint32 (4 bytes big-endian)
//
// The bytes key persisted state: a change must bump formatVersion and be
// migrated; the golden tests pin them.
package keycoder

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"time"
)

// formatVersion is the version of the byte format described in the package
// comment (not written into keys).
const formatVersion = 1

// Column describes one column of a row type.
type Column struct {
	Name  string       // beam tag name or Go field name
	Index int          // field index in the struct
	Type  reflect.Type // field type
}

var timeType = reflect.TypeFor[time.Time]()

func structType(t reflect.Type) (reflect.Type, error) {
	if t == nil {
		return nil, errors.New("row type is nil; want a struct or a pointer to a struct")
	}
	st := t
	if st.Kind() == reflect.Pointer {
		st = st.Elem()
	}
	if st.Kind() != reflect.Struct {
		return nil, fmt.Errorf("row type %v is not a struct or a pointer to a struct", t)
	}
	return st, nil
}

func columnName(f reflect.StructField) (string, bool) {
	if !f.IsExported() {
		return "", false
	}
	tag, _, _ := strings.Cut(f.Tag.Get("beam"), ",")
	switch tag {
	case "-":
		return "", false
	case "":
		return f.Name, true
	}
	return tag, true
}

// Columns lists the columns of struct type t in field order. It fails if t
// is not a struct or pointer to struct, or if two fields share a column name.
func Columns(t reflect.Type) ([]Column, error) {
	st, err := structType(t)
	if err != nil {
		return nil, err
	}
	cols := make([]Column, 0, st.NumField())
	byName := make(map[string]int, st.NumField())
	for i := range st.NumField() {
		f := st.Field(i)
		name, ok := columnName(f)
		if !ok {
			continue
		}
		if j, dup := byName[name]; dup {
			return nil, fmt.Errorf("row type %v has two columns named %q (fields %s and %s); give one a different beam:\"name\" tag",
				st, name, st.Field(j).Name, f.Name)
		}
		byName[name] = i
		cols = append(cols, Column{Name: name, Index: i, Type: f.Type})
	}
	return cols, nil
}

// Lookup finds a column of t by name; the error for an unknown name lists the
// available column names.
func Lookup(t reflect.Type, name string) (Column, error) {
	cols, err := Columns(t)
	if err != nil {
		return Column{}, err
	}
	for _, c := range cols {
		if c.Name == name {
			return c, nil
		}
	}
	return Column{}, unknownColumn(t, name, cols)
}

func unknownColumn(t reflect.Type, name string, cols []Column) error {
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.Name
	}
	avail := strings.Join(names, ", ")
	if avail == "" {
		avail = "(none)"
	}
	return fmt.Errorf("unknown column %q in row type %v; available columns: %s", name, t, avail)
}

// appendFunc appends the encoding of one column value, chosen once per
// column.
type appendFunc func(dst []byte, v reflect.Value) []byte

type keyColumn struct {
	index int
	fn    appendFunc
}

// Encoder encodes a fixed list of key columns of a fixed struct type. It is
// immutable after New and safe for concurrent use.
type Encoder struct {
	t    reflect.Type // struct type (never a pointer)
	cols []keyColumn
}

// New validates columns against t: it rejects an unknown column, a column
// named twice and a column of an unsupported type. Zero columns encode
// every row to the empty key.
func New(t reflect.Type, columns []string) (*Encoder, error) {
	st, err := structType(t)
	if err != nil {
		return nil, err
	}
	all, err := Columns(st)
	if err != nil {
		return nil, err
	}
	byName := make(map[string]Column, len(all))
	for _, c := range all {
		byName[c.Name] = c
	}
	e := &Encoder{t: st, cols: make([]keyColumn, 0, len(columns))}
	seen := make(map[string]bool, len(columns))
	for _, name := range columns {
		c, ok := byName[name]
		if !ok {
			return nil, unknownColumn(st, name, all)
		}
		if seen[name] {
			return nil, fmt.Errorf("key column %q is listed more than once; list each key column once", name)
		}
		seen[name] = true
		fn := encoderFor(c.Type)
		if fn == nil {
			return nil, fmt.Errorf("key column %q has type %v, which cannot be a deterministic key; "+
				"use a string/[]byte/bool/integer/float/time.Time column or a pointer to one", name, c.Type)
		}
		e.cols = append(e.cols, keyColumn{index: c.Index, fn: fn})
	}
	return e, nil
}

// Append appends the encoding of row's key columns to dst. row is a struct
// value of the Encoder's type or a pointer to one (or an interface holding
// either). It panics on a nil pointer or a row of another type.
func (e *Encoder) Append(dst []byte, row reflect.Value) []byte {
	if row.Kind() == reflect.Interface {
		row = row.Elem()
	}
	if row.Kind() == reflect.Pointer {
		if row.IsNil() {
			panic(fmt.Sprintf("keycoder: nil %v row", row.Type()))
		}
		row = row.Elem()
	}
	if !row.IsValid() {
		panic(fmt.Sprintf("keycoder: invalid (nil) row; want %v", e.t))
	}
	if row.Type() != e.t {
		panic(fmt.Sprintf("keycoder: row of type %v given to an encoder for %v", row.Type(), e.t))
	}
	for _, c := range e.cols {
		dst = c.fn(dst, row.Field(c.index))
	}
	return dst
}

// Encode is Append(nil, reflect.ValueOf(row)). The empty key is returned as
// nil.
func (e *Encoder) Encode(row any) []byte {
	return e.Append(nil, reflect.ValueOf(row))
}

// encoderFor returns the append function for column type t, or nil if t is
// not a supported key type.
func encoderFor(t reflect.Type) appendFunc {
	if t == timeType {
		return appendTime
	}
	switch t.Kind() {
	case reflect.String:
		return appendString
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return appendBytes
		}
	case reflect.Bool:
		return appendBool
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return appendInt
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return appendUint
	case reflect.Float32:
		return appendFloat32
	case reflect.Float64:
		return appendFloat64
	case reflect.Pointer:
		if t.Elem().Kind() == reflect.Pointer {
			return nil // one level only: **T would need two NULL kinds
		}
		inner := encoderFor(t.Elem())
		if inner == nil {
			return nil
		}
		return func(dst []byte, v reflect.Value) []byte {
			if v.IsNil() {
				return append(dst, 0)
			}
			return inner(append(dst, 1), v.Elem())
		}
	}
	return nil
}

func appendString(dst []byte, v reflect.Value) []byte {
	s := v.String()
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendBytes(dst []byte, v reflect.Value) []byte {
	b := v.Bytes()
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

func appendBool(dst []byte, v reflect.Value) []byte {
	if v.Bool() {
		return append(dst, 1)
	}
	return append(dst, 0)
}

func appendInt(dst []byte, v reflect.Value) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(v.Int()))
}

func appendUint(dst []byte, v reflect.Value) []byte {
	return binary.BigEndian.AppendUint64(dst, v.Uint())
}

func appendFloat64(dst []byte, v reflect.Value) []byte {
	return binary.BigEndian.AppendUint64(dst, canonicalBits64(v.Float()))
}

func appendFloat32(dst []byte, v reflect.Value) []byte {
	// Float() widens float32 exactly, so narrowing back is lossless.
	return binary.BigEndian.AppendUint32(dst, canonicalBits32(float32(v.Float())))
}

func appendTime(dst []byte, v reflect.Value) []byte {
	// Interface() would allocate a copy of an addressable struct.
	var t time.Time
	if v.CanAddr() {
		t = *v.Addr().Interface().(*time.Time)
	} else {
		t = v.Interface().(time.Time)
	}
	dst = binary.BigEndian.AppendUint64(dst, uint64(t.Unix()))
	return binary.BigEndian.AppendUint32(dst, uint32(t.Nanosecond()))
}

// Canonical NaN bit patterns: the quiet NaNs with zero payload.
const (
	canonicalNaN64 = 0x7ff8000000000000
	canonicalNaN32 = 0x7fc00000
)

func canonicalBits64(f float64) uint64 {
	switch {
	case f != f:
		return canonicalNaN64
	case f == 0:
		return 0
	}
	return math.Float64bits(f)
}

func canonicalBits32(f float32) uint32 {
	switch {
	case f != f:
		return canonicalNaN32
	case f == 0:
		return 0
	}
	return math.Float32bits(f)
}

// CanonicalFloat64 returns -0 as 0 and every NaN as one fixed NaN, so that
// values equal under GROUP BY semantics have equal bits.
func CanonicalFloat64(f float64) float64 {
	return math.Float64frombits(canonicalBits64(f))
}

// CanonicalFloat32 is CanonicalFloat64 for float32.
func CanonicalFloat32(f float32) float32 {
	return math.Float32frombits(canonicalBits32(f))
}

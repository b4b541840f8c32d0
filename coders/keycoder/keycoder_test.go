package keycoder

import (
	"encoding/hex"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func ptr[T any](v T) *T { return &v }

type (
	kind    string
	id      int64
	myTime  time.Time
	byteish uint8
)

// allRow has a column of every supported type, plus non-columns.
type allRow struct {
	S    string `beam:"s"`
	S2   string `beam:"s2,omitempty"`
	B    []byte `beam:"b"`
	Bo   bool
	I    int
	I8   int8
	I16  int16
	I32  int32
	I64  int64
	U    uint
	U8   uint8
	U16  uint16
	U32  uint32
	U64  uint64
	F32  float32
	F64  float64
	T    time.Time
	PS   *string
	PB   *[]byte
	PBo  *bool
	PI   *int64
	PU   *uint32
	PF   *float64
	PF32 *float32
	PT   *time.Time
	K    kind
	ID   id `beam:",omitempty"`
	BB   []byteish

	hidden int            //nolint:unused // unexported: never a column
	Skip   map[string]int `beam:"-"`
}

var allRowType = reflect.TypeFor[allRow]()

func newEncoder(t *testing.T, typ reflect.Type, cols ...string) *Encoder {
	t.Helper()
	e, err := New(typ, cols)
	require.NoError(t, err)
	return e
}

func TestEncode_EqualKeysIffEqualBytes(t *testing.T) {
	cet := time.FixedZone("CET", 3600)
	nyc := time.FixedZone("EST", -5*3600)
	instant := time.Date(2024, 3, 1, 12, 30, 0, 123456789, time.UTC)
	nan1 := math.Float64frombits(0x7ff8000000000001)
	nan2 := math.Float64frombits(0xfff0000000000abc) // negative signalling NaN
	nan32a := math.Float32frombits(0x7fc00001)
	nan32b := math.Float32frombits(0xff800001)
	now := time.Now() // carries a monotonic reading

	tests := []struct {
		name  string
		cols  []string
		a, b  allRow
		equal bool
	}{
		{"string equal", []string{"s"}, allRow{S: "abc"}, allRow{S: "abc"}, true},
		{"string differs", []string{"s"}, allRow{S: "abc"}, allRow{S: "abd"}, false},
		{"empty string differs from non-empty", []string{"s"}, allRow{S: ""}, allRow{S: "\x00"}, false},
		{"bytes equal", []string{"b"}, allRow{B: []byte("ab")}, allRow{B: []byte("ab")}, true},
		{"nil bytes equals empty bytes (not NULL)", []string{"b"}, allRow{B: nil}, allRow{B: []byte{}}, true},
		{"bytes differ", []string{"b"}, allRow{B: []byte{0}}, allRow{B: []byte{}}, false},
		{"bool equal", []string{"Bo"}, allRow{Bo: true}, allRow{Bo: true}, true},
		{"bool differs", []string{"Bo"}, allRow{Bo: true}, allRow{Bo: false}, false},
		{"int equal", []string{"I"}, allRow{I: -7}, allRow{I: -7}, true},
		{"int differs in sign", []string{"I"}, allRow{I: -1}, allRow{I: 1}, false},
		{"int8 differs", []string{"I8"}, allRow{I8: math.MinInt8}, allRow{I8: math.MaxInt8}, false},
		{"int16 equal", []string{"I16"}, allRow{I16: -300}, allRow{I16: -300}, true},
		{"int32 differs", []string{"I32"}, allRow{I32: 1 << 20}, allRow{I32: 1<<20 + 1}, false},
		{"int64 extremes differ", []string{"I64"}, allRow{I64: math.MinInt64}, allRow{I64: math.MaxInt64}, false},
		{"uint equal", []string{"U"}, allRow{U: 42}, allRow{U: 42}, true},
		{"uint8 differs", []string{"U8"}, allRow{U8: 0}, allRow{U8: 255}, false},
		{"uint16 differs", []string{"U16"}, allRow{U16: 256}, allRow{U16: 1}, false},
		{"uint32 equal", []string{"U32"}, allRow{U32: math.MaxUint32}, allRow{U32: math.MaxUint32}, true},
		{"uint64 top values differ", []string{"U64"}, allRow{U64: math.MaxUint64}, allRow{U64: math.MaxUint64 - 1}, false},
		{"float64 -0 equals 0", []string{"F64"}, allRow{F64: math.Copysign(0, -1)}, allRow{F64: 0}, true},
		{"float32 -0 equals 0", []string{"F32"}, allRow{F32: float32(math.Copysign(0, -1))}, allRow{F32: 0}, true},
		{"float64 NaN payloads are equal", []string{"F64"}, allRow{F64: nan1}, allRow{F64: nan2}, true},
		{"float32 NaN payloads are equal", []string{"F32"}, allRow{F32: nan32a}, allRow{F32: nan32b}, true},
		{"float64 NaN differs from 0", []string{"F64"}, allRow{F64: math.NaN()}, allRow{F64: 0}, false},
		{"float64 NaN differs from +Inf", []string{"F64"}, allRow{F64: math.NaN()}, allRow{F64: math.Inf(1)}, false},
		{"float64 neighbours differ", []string{"F64"}, allRow{F64: 1}, allRow{F64: math.Nextafter(1, 2)}, false},
		{"float32 neighbours differ", []string{"F32"}, allRow{F32: 1}, allRow{F32: math.Nextafter32(1, 2)}, false},
		{"time same instant in UTC and CET is equal", []string{"T"}, allRow{T: instant}, allRow{T: instant.In(cet)}, true},
		{"time same instant in two zones is equal", []string{"T"}, allRow{T: instant.In(nyc)}, allRow{T: instant.In(cet)}, true},
		{"time monotonic reading is ignored", []string{"T"}, allRow{T: now}, allRow{T: now.Round(0)}, true},
		{"time differs by a nanosecond", []string{"T"}, allRow{T: instant}, allRow{T: instant.Add(1)}, false},
		{"same wall clock in two zones differs", []string{"T"},
			allRow{T: time.Date(2024, 1, 1, 0, 0, 0, 0, cet)}, allRow{T: time.Date(2024, 1, 1, 0, 0, 0, 0, nyc)}, false},
		{"zero time differs from Unix epoch", []string{"T"}, allRow{T: time.Time{}}, allRow{T: time.Unix(0, 0)}, false},
		{"NULL equals NULL", []string{"PS"}, allRow{}, allRow{}, true},
		{"NULL string differs from empty string", []string{"PS"}, allRow{PS: nil}, allRow{PS: ptr("")}, false},
		{"NULL bytes differ from nil bytes", []string{"PB"}, allRow{PB: nil}, allRow{PB: ptr([]byte(nil))}, false},
		{"pointer to nil bytes equals pointer to empty bytes", []string{"PB"}, allRow{PB: ptr([]byte(nil))}, allRow{PB: ptr([]byte{})}, true},
		{"NULL bool differs from false", []string{"PBo"}, allRow{PBo: nil}, allRow{PBo: ptr(false)}, false},
		{"NULL int differs from 0", []string{"PI"}, allRow{PI: nil}, allRow{PI: ptr(int64(0))}, false},
		{"NULL uint differs from 0", []string{"PU"}, allRow{PU: nil}, allRow{PU: ptr(uint32(0))}, false},
		{"NULL float differs from 0", []string{"PF"}, allRow{PF: nil}, allRow{PF: ptr(0.0)}, false},
		{"NULL time differs from zero time", []string{"PT"}, allRow{PT: nil}, allRow{PT: ptr(time.Time{})}, false},
		{"distinct pointers to equal values are equal", []string{"PS"}, allRow{PS: ptr("x")}, allRow{PS: ptr("x")}, true},
		{"pointer values differ", []string{"PI"}, allRow{PI: ptr(int64(1))}, allRow{PI: ptr(int64(2))}, false},
		{"pointer float -0 equals 0", []string{"PF"}, allRow{PF: ptr(math.Copysign(0, -1))}, allRow{PF: ptr(0.0)}, true},
		{"pointer float32 NaNs are equal", []string{"PF32"}, allRow{PF32: ptr(nan32a)}, allRow{PF32: ptr(nan32b)}, true},
		{"pointer time same instant in two zones is equal", []string{"PT"}, allRow{PT: ptr(instant)}, allRow{PT: ptr(instant.In(cet))}, true},
		{"named string type", []string{"K"}, allRow{K: "a"}, allRow{K: "a"}, true},
		{"named int type differs", []string{"ID"}, allRow{ID: 1}, allRow{ID: 2}, false},
		{"slice of named byte type", []string{"BB"}, allRow{BB: []byteish{1, 2}}, allRow{BB: []byteish{1, 2}}, true},
		{"multi-column boundary is injective for strings", []string{"s", "s2"}, allRow{S: "ab", S2: "c"}, allRow{S: "a", S2: "bc"}, false},
		{"multi-column boundary is injective for bytes", []string{"b", "s"}, allRow{B: []byte("ab"), S: "c"}, allRow{B: []byte("a"), S: "bc"}, false},
		{"multi-column NULL then string vs empty then string", []string{"PS", "s"}, allRow{PS: nil, S: "\x00"}, allRow{PS: ptr(""), S: ""}, false},
		{"multi-column equal", []string{"s", "PI", "T"},
			allRow{S: "a", PI: ptr(int64(3)), T: instant}, allRow{S: "a", PI: ptr(int64(3)), T: instant.In(cet)}, true},
		{"multi-column differs in last column only", []string{"s", "PI", "F64"},
			allRow{S: "a", PI: nil, F64: 1}, allRow{S: "a", PI: nil, F64: 2}, false},
		{"column order matters to the bytes, not to equality", []string{"F64", "s"}, allRow{S: "a", F64: 1}, allRow{S: "a", F64: 1}, true},
		{"non-key columns are ignored", []string{"s"}, allRow{S: "a", I: 1, PS: ptr("x")}, allRow{S: "a", I: 2}, true},
		{"zero columns make every row equal", nil, allRow{S: "a"}, allRow{S: "b", PI: ptr(int64(1))}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEncoder(t, allRowType, tt.cols...)
			ka, kb := e.Encode(tt.a), e.Encode(tt.b)
			if tt.equal {
				assert.Equal(t, hex.EncodeToString(ka), hex.EncodeToString(kb))
			} else {
				assert.NotEqual(t, hex.EncodeToString(ka), hex.EncodeToString(kb))
			}
		})
	}
}

// A non-nil pointer column encodes as a presence byte followed by exactly
// what the matching value column encodes.
func TestEncode_PointerColumnIsPresenceByteThenValue(t *testing.T) {
	at := time.Date(2020, 5, 6, 7, 8, 9, 10, time.FixedZone("X", 7200))
	row := allRow{
		S: "hello", PS: ptr("hello"),
		B: []byte{1, 2}, PB: ptr([]byte{1, 2}),
		Bo: true, PBo: ptr(true),
		I64: -5, PI: ptr(int64(-5)),
		U32: 9, PU: ptr(uint32(9)),
		F64: math.Copysign(0, -1), PF: ptr(0.0),
		F32: 2.5, PF32: ptr(float32(2.5)),
		T: at, PT: ptr(at.UTC()),
	}
	for value, pointer := range map[string]string{
		"s": "PS", "b": "PB", "Bo": "PBo", "I64": "PI", "U32": "PU", "F64": "PF", "F32": "PF32", "T": "PT",
	} {
		t.Run(pointer, func(t *testing.T) {
			v := newEncoder(t, allRowType, value).Encode(row)
			p := newEncoder(t, allRowType, pointer).Encode(row)
			assert.Equal(t, append([]byte{1}, v...), p)
		})
	}
}

func TestAppend_RowFormsEncodeTheSame(t *testing.T) {
	row := allRow{S: "a", T: time.Unix(5, 6).In(time.FixedZone("Z", 60)), PT: ptr(time.Unix(7, 8)), PF: ptr(1.5)}
	e := newEncoder(t, allRowType, "s", "T", "PT", "PF")
	want := e.Encode(row)
	require.NotEmpty(t, want)

	forms := map[string]reflect.Value{
		"struct value":              reflect.ValueOf(row),
		"pointer":                   reflect.ValueOf(&row),
		"addressable struct value":  reflect.ValueOf(&row).Elem(),
		"interface holding pointer": reflect.ValueOf([]any{&row}).Index(0),
		"interface holding value":   reflect.ValueOf([]any{row}).Index(0),
	}
	for name, v := range forms {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, want, e.Append(nil, v))
		})
	}
	t.Run("appends after existing bytes", func(t *testing.T) {
		got := e.Append([]byte("prefix"), reflect.ValueOf(row))
		assert.Equal(t, append([]byte("prefix"), want...), got)
	})
	t.Run("encoder built from pointer type", func(t *testing.T) {
		ep := newEncoder(t, reflect.PointerTo(allRowType), "s", "T", "PT", "PF")
		assert.Equal(t, want, ep.Encode(&row))
		assert.Equal(t, want, ep.Encode(row))
	})
}

func TestAppend_PanicsOnMisuse(t *testing.T) {
	e := newEncoder(t, allRowType, "s")
	tests := []struct {
		name string
		row  any
		msg  string
	}{
		{"nil interface", nil, "invalid (nil) row"},
		{"nil pointer", (*allRow)(nil), "nil *keycoder.allRow row"},
		{"other type", struct{ S string }{"a"}, "given to an encoder for keycoder.allRow"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				r := recover()
				require.NotNil(t, r, "want a panic")
				msg, ok := r.(string)
				require.True(t, ok, "want a string panic, got %T", r)
				assert.True(t, strings.HasPrefix(msg, "keycoder: "), msg)
				assert.Contains(t, msg, tt.msg)
			}()
			e.Encode(tt.row)
		})
	}
}

type goldenRow struct {
	Name string `beam:"name"`
	Blob []byte
	N    int64
	U    uint16
	Ok   bool
	F    float64
	G    float32
	T    time.Time
	P    *string
}

// TestEncode_GoldenBytes pins format version 1. If it fails, the encoding
// changed: persisted state keys would no longer match. Do not update the
// hex; bump formatVersion and plan the migration instead.
func TestEncode_GoldenBytes(t *testing.T) {
	require.Equal(t, 1, formatVersion)
	allCols := []string{"name", "Blob", "N", "U", "Ok", "F", "G", "T", "P"}
	tests := []struct {
		name string
		cols []string
		row  goldenRow
		hex  string
	}{
		{
			name: "all columns, NULL pointer, negative zero",
			cols: allCols,
			row: goldenRow{Name: "ab", N: -2, U: 0x1234, Ok: true, F: 1.5,
				G: float32(math.Copysign(0, -1)), T: time.Unix(1, 5).UTC()},
			hex: "026162" + "00" + "fffffffffffffffe" + "0000000000001234" + "01" +
				"3ff8000000000000" + "00000000" + "0000000000000001" + "00000005" + "00",
		},
		{
			name: "all columns, NaNs, time before epoch in another zone, pointer set",
			cols: allCols,
			row: goldenRow{Name: "é", Blob: []byte{0, 0xff}, N: math.MinInt64, U: 0xffff,
				F: math.NaN(), G: float32(math.NaN()),
				T: time.Unix(-1, 999999999).In(time.FixedZone("X", -3600)), P: ptr("z")},
			hex: "02c3a9" + "0200ff" + "8000000000000000" + "000000000000ffff" + "00" +
				"7ff8000000000000" + "7fc00000" + "ffffffffffffffff" + "3b9ac9ff" + "01017a",
		},
		{
			name: "zero time and a two-byte length prefix, columns reordered",
			cols: []string{"T", "name"},
			row:  goldenRow{Name: strings.Repeat("x", 128)},
			hex:  "fffffff1886e0900" + "00000000" + "8001" + strings.Repeat("78", 128),
		},
		{
			name: "no columns is the empty key",
			cols: nil,
			row:  goldenRow{Name: "ignored"},
			hex:  "",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEncoder(t, reflect.TypeFor[goldenRow](), tt.cols...)
			assert.Equal(t, tt.hex, hex.EncodeToString(e.Encode(tt.row)))
		})
	}
}

type badRow struct {
	Tags    []string `beam:"tags"`
	M       map[string]int
	Arr     [2]byte
	Iface   any
	Struct  struct{ A int }
	Ch      chan int
	Fn      func()
	PSlice  *[]string
	PP      **string
	Uptr    uintptr
	Cplx    complex128
	MyTime  myTime
	PMyTime *myTime
	Err     error
	OK      string
}

func TestNew_Errors(t *testing.T) {
	badType := reflect.TypeFor[badRow]()
	unsupported := func(col, typ string) string {
		return "key column \"" + col + "\" has type " + typ + ", which cannot be a deterministic key; " +
			"use a string/[]byte/bool/integer/float/time.Time column or a pointer to one"
	}
	tests := []struct {
		name string
		typ  reflect.Type
		cols []string
		want string
	}{
		{"unknown column lists available columns", allRowType, []string{"s", "nope"},
			`unknown column "nope" in row type keycoder.allRow; available columns: s, s2, b, Bo, I, I8, I16, I32, I64, U, U8, U16, U32, U64, ` +
				`F32, F64, T, PS, PB, PBo, PI, PU, PF, PF32, PT, K, ID, BB`},
		{"unexported field is not a column", allRowType, []string{"hidden"}, `unknown column "hidden"`},
		{"dash-tagged field is not a column", allRowType, []string{"Skip"}, `unknown column "Skip"`},
		{"tagged field is not known by its Go name", allRowType, []string{"S"}, `unknown column "S"`},
		{"unknown column in a type without columns", reflect.TypeFor[struct{ x int }](), []string{"x"},
			`unknown column "x" in row type struct { x int }; available columns: (none)`},
		{"duplicate column", allRowType, []string{"s", "I", "s"}, `key column "s" is listed more than once`},
		{"slice of strings", badType, []string{"OK", "tags"}, unsupported("tags", "[]string")},
		{"map", badType, []string{"M"}, unsupported("M", "map[string]int")},
		{"array", badType, []string{"Arr"}, unsupported("Arr", "[2]uint8")},
		{"interface", badType, []string{"Iface"}, unsupported("Iface", "interface {}")},
		{"error interface", badType, []string{"Err"}, unsupported("Err", "error")},
		{"struct", badType, []string{"Struct"}, unsupported("Struct", "struct { A int }")},
		{"chan", badType, []string{"Ch"}, unsupported("Ch", "chan int")},
		{"func", badType, []string{"Fn"}, unsupported("Fn", "func()")},
		{"pointer to slice", badType, []string{"PSlice"}, unsupported("PSlice", "*[]string")},
		{"pointer to pointer", badType, []string{"PP"}, unsupported("PP", "**string")},
		{"uintptr", badType, []string{"Uptr"}, unsupported("Uptr", "uintptr")},
		{"complex", badType, []string{"Cplx"}, unsupported("Cplx", "complex128")},
		{"type derived from time.Time", badType, []string{"MyTime"}, unsupported("MyTime", "keycoder.myTime")},
		{"pointer to type derived from time.Time", badType, []string{"PMyTime"}, unsupported("PMyTime", "*keycoder.myTime")},
		{"nil type", nil, nil, "row type is nil"},
		{"non-struct type", reflect.TypeFor[int](), nil, "row type int is not a struct or a pointer to a struct"},
		{"pointer to pointer to struct", reflect.TypeFor[**allRow](), nil, "row type **keycoder.allRow is not a struct"},
		{"two fields with one column name", reflect.TypeFor[struct {
			A string `beam:"x"`
			B string `beam:"x"`
		}](), nil, `has two columns named "x" (fields A and B)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := New(tt.typ, tt.cols)
			require.Error(t, err)
			assert.Nil(t, e)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestColumns_ListsExportedTopLevelFieldsInOrder(t *testing.T) {
	type Embedded struct{ Inner string }
	type row struct {
		Embedded
		A      string `beam:"a,omitempty"`
		B      int    `beam:",omitempty"`
		c      int
		D      []byte `beam:"-"`
		E      *bool  `json:"ignored"`
		_      int
		Second string `beam:"second"`
	}
	want := []Column{
		{Name: "Embedded", Index: 0, Type: reflect.TypeFor[Embedded]()},
		{Name: "a", Index: 1, Type: reflect.TypeFor[string]()},
		{Name: "B", Index: 2, Type: reflect.TypeFor[int]()},
		{Name: "E", Index: 5, Type: reflect.TypeFor[*bool]()},
		{Name: "second", Index: 7, Type: reflect.TypeFor[string]()},
	}
	for _, typ := range []reflect.Type{reflect.TypeFor[row](), reflect.TypeFor[*row]()} {
		t.Run(typ.String(), func(t *testing.T) {
			got, err := Columns(typ)
			require.NoError(t, err)
			assert.Equal(t, want, got)
		})
	}
	t.Run("non-struct is an error", func(t *testing.T) {
		_, err := Columns(reflect.TypeFor[[]allRow]())
		assert.EqualError(t, err, "row type []keycoder.allRow is not a struct or a pointer to a struct")
	})
}

func TestLookup(t *testing.T) {
	tests := []struct {
		name    string
		typ     reflect.Type
		col     string
		want    Column
		wantErr string
	}{
		{"by tag name", allRowType, "s2", Column{Name: "s2", Index: 1, Type: reflect.TypeFor[string]()}, ""},
		{"by Go name", allRowType, "PT", Column{Name: "PT", Index: 24, Type: reflect.TypeFor[*time.Time]()}, ""},
		{"through pointer type", reflect.PointerTo(allRowType), "b", Column{Name: "b", Index: 2, Type: reflect.TypeFor[[]byte]()}, ""},
		{"unknown name lists available columns", reflect.TypeFor[goldenRow](), "Nme", Column{},
			`unknown column "Nme" in row type keycoder.goldenRow; available columns: name, Blob, N, U, Ok, F, G, T, P`},
		{"non-struct", reflect.TypeFor[string](), "x", Column{}, "row type string is not a struct or a pointer to a struct"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Lookup(tt.typ, tt.col)
			if tt.wantErr != "" {
				assert.EqualError(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestSupportedTypes(t *testing.T) {
	tests := []struct {
		typ  reflect.Type
		want bool
	}{
		{reflect.TypeFor[string](), true},
		{reflect.TypeFor[[]byte](), true},
		{reflect.TypeFor[bool](), true},
		{reflect.TypeFor[int](), true},
		{reflect.TypeFor[int8](), true},
		{reflect.TypeFor[uint64](), true},
		{reflect.TypeFor[float32](), true},
		{reflect.TypeFor[float64](), true},
		{reflect.TypeFor[time.Time](), true},
		{reflect.TypeFor[*time.Time](), true},
		{reflect.TypeFor[*[]byte](), true},
		{reflect.TypeFor[*uint16](), true},
		{reflect.TypeFor[kind](), true},
		{reflect.TypeFor[*id](), true},
		{reflect.TypeFor[[]byteish](), true},
		{nil, false},
		{reflect.TypeFor[**int](), false},
		{reflect.TypeFor[[]string](), false},
		{reflect.TypeFor[[4]byte](), false},
		{reflect.TypeFor[map[string]string](), false},
		{reflect.TypeFor[any](), false},
		{reflect.TypeFor[struct{}](), false},
		{reflect.TypeFor[myTime](), false},
		{reflect.TypeFor[uintptr](), false},
		{reflect.TypeFor[complex64](), false},
		{reflect.TypeFor[chan int](), false},
		{reflect.TypeFor[func()](), false},
	}
	for _, tt := range tests {
		name := "nil"
		if tt.typ != nil {
			name = tt.typ.String()
		}
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tt.want, supported(tt.typ))
		})
	}
}

func TestCanonicalFloat(t *testing.T) {
	tests := []struct {
		name     string
		in       float64
		wantBits uint64
	}{
		{"negative zero becomes zero", math.Copysign(0, -1), 0},
		{"zero stays", 0, 0},
		{"quiet NaN with payload", math.Float64frombits(0x7ff8000000000001), 0x7ff8000000000000},
		{"negative signalling NaN", math.Float64frombits(0xfff0000000000001), 0x7ff8000000000000},
		{"ordinary value unchanged", -1.25, math.Float64bits(-1.25)},
		{"infinity unchanged", math.Inf(-1), math.Float64bits(math.Inf(-1))},
		{"smallest subnormal unchanged", math.SmallestNonzeroFloat64, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.wantBits, math.Float64bits(CanonicalFloat64(tt.in)))
		})
	}

	tests32 := []struct {
		name     string
		in       float32
		wantBits uint32
	}{
		{"negative zero becomes zero", float32(math.Copysign(0, -1)), 0},
		{"quiet NaN with payload", math.Float32frombits(0x7fc00001), 0x7fc00000},
		{"negative signalling NaN", math.Float32frombits(0xff800001), 0x7fc00000},
		{"ordinary value unchanged", 3.5, math.Float32bits(3.5)},
		{"infinity unchanged", float32(math.Inf(1)), math.Float32bits(float32(math.Inf(1)))},
	}
	for _, tt := range tests32 {
		t.Run("float32 "+tt.name, func(t *testing.T) {
			assert.Equal(t, tt.wantBits, math.Float32bits(CanonicalFloat32(tt.in)))
		})
	}
}

// Append must not allocate per row for any column type or row form; the
// time.Time column is the risky one (reflect.Value.Interface copies
// addressable structs).
func TestAppend_DoesNotAllocate(t *testing.T) {
	row := allRow{S: "a", B: []byte("b"), T: time.Unix(1, 2), PS: ptr("x"), PB: ptr([]byte("y")), PBo: ptr(true),
		PI: ptr(int64(1)), PU: ptr(uint32(2)), PF: ptr(3.0), PF32: ptr(float32(4)), PT: ptr(time.Unix(3, 4)), K: "k", ID: 5}
	cols, err := Columns(allRowType)
	require.NoError(t, err)
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.Name
	}
	e := newEncoder(t, allRowType, names...)
	buf := make([]byte, 0, 1024)
	for name, v := range map[string]reflect.Value{
		"struct value":             reflect.ValueOf(row),
		"pointer":                  reflect.ValueOf(&row),
		"addressable struct value": reflect.ValueOf(&row).Elem(),
	} {
		t.Run(name, func(t *testing.T) {
			allocs := testing.AllocsPerRun(100, func() { buf = e.Append(buf[:0], v) })
			assert.Zero(t, allocs)
		})
	}
}

// supported reports whether type t can be a key column type.
func supported(t reflect.Type) bool {
	return t != nil && encoderFor(t) != nil
}

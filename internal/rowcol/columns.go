package rowcol

import (
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/beamdedup/beamdedup/coders/ordercoder"
	"github.com/beamdedup/beamdedup/internal/micros"
	"github.com/beamdedup/beamdedup/transforms/rowkind"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

var (
	timeType  = reflect.TypeFor[time.Time]()
	int64Type = reflect.TypeFor[int64]()
	kindType  = reflect.TypeFor[rowkind.Kind]()
)

// deref is the type a column of type t holds: t, or what it points to (a
// nil pointer is NULL).
func deref(t reflect.Type) (_ reflect.Type, ptr bool) {
	if t.Kind() == reflect.Pointer {
		return t.Elem(), true
	}
	return t, false
}

// TimeColumn reads an OnTime column of a struct row type: a time.Time or
// an int64 of Unix milliseconds, or a pointer to one. Its value orders rows
// at the column's own precision, to the microsecond: a time.Time's
// microseconds (what a PostgreSQL timestamp keeps), an int64's
// milliseconds.
type TimeColumn struct {
	Name  string
	index int
	ptr   bool
	isInt bool
}

// NewTimeColumn finds column col of struct type t and checks its type; the
// error names the option (OnTime).
func NewTimeColumn(t reflect.Type, col string) (TimeColumn, error) {
	c, err := lookup(t, "OnTime", col)
	if err != nil {
		return TimeColumn{}, err
	}
	if ft, ptr := deref(c.Type); ft == timeType || ft == int64Type {
		return TimeColumn{Name: col, index: c.Index, ptr: ptr, isInt: ft == int64Type}, nil
	}
	return TimeColumn{}, fmt.Errorf("OnTime(%q): the column has type %v; it must be time.Time or int64 Unix milliseconds (or a pointer to one)", col, c.Type)
}

// Read returns the column's value in row (a struct value of the column's
// type) in Unix microseconds (an int64 column's milliseconds times 1000),
// or the reason it has none, naming the column: NULL (a nil pointer), the
// zero time.Time, or a time outside Beam's timestamp range.
func (c TimeColumn) Read(row reflect.Value) (us int64, reason string) {
	v := row.Field(c.index)
	if c.ptr {
		if v.IsNil() {
			return 0, fmt.Sprintf("OnTime column %q is NULL", c.Name)
		}
		v = v.Elem()
	}
	if c.isInt {
		ms := v.Int()
		if ms < micros.MinMillis || ms >= micros.MaxMillis {
			return 0, c.outOfRange(fmt.Sprintf("%d ms", ms))
		}
		return ms * 1000, ""
	}
	t := v.Interface().(time.Time)
	if t.IsZero() {
		return 0, fmt.Sprintf("OnTime column %q holds the zero time.Time (no time was set)", c.Name)
	}
	// UnixMilli is defined within 292 million years of 1970, and Beam's
	// range is within 292 thousand.
	if sec := t.Unix(); sec < micros.MinMillis/1000-1 || sec > micros.MaxMillis/1000+1 {
		return 0, c.outOfRange(t.String())
	}
	if ms := t.UnixMilli(); ms < micros.MinMillis || ms >= micros.MaxMillis {
		return 0, c.outOfRange(t.String())
	}
	return t.UnixMicro(), ""
}

func (c TimeColumn) outOfRange(v string) string {
	return fmt.Sprintf("OnTime column %q: event time %s is outside Beam's timestamp range", c.Name, v)
}

// KindColumn reads and writes the kind column of a struct row type: a
// string holding +I, -U, +U or -D, or a rowkind.Kind. The zero value of
// either, "" or Insert, reads as +I: a row that never set its kind is an
// insert.
type KindColumn struct {
	Name   string
	index  int
	isKind bool // a rowkind.Kind, else a string
}

// NewKindColumn finds column col of struct type t and checks its type; the
// error names the option (KindColumn).
func NewKindColumn(t reflect.Type, col string) (KindColumn, error) {
	c, err := lookup(t, "KindColumn", col)
	if err != nil {
		return KindColumn{}, err
	}
	switch {
	case c.Type == kindType:
		return KindColumn{Name: col, index: c.Index, isKind: true}, nil
	case c.Type.Kind() == reflect.String:
		return KindColumn{Name: col, index: c.Index}, nil
	}
	return KindColumn{}, fmt.Errorf("KindColumn(%q): the column has type %v; it must be a string (\"+I\", \"-U\", \"+U\", \"-D\") or a rowkind.Kind", col, c.Type)
}

// Read returns the kind of row (a struct value of the column's type), or
// the reason it has none, naming the column and the accepted forms.
func (c KindColumn) Read(row reflect.Value) (rowkind.Kind, string) {
	v := row.Field(c.index)
	if !c.isKind {
		if v.Len() == 0 {
			return rowkind.Insert, ""
		}
		k, err := rowkind.Parse(v.String())
		if err != nil {
			return 0, fmt.Sprintf("KindColumn %q: %v", c.Name, err)
		}
		return k, ""
	}
	k := rowkind.Kind(v.Int())
	if !k.Valid() {
		return 0, fmt.Sprintf("KindColumn %q: unknown row kind %v: want one of +I, -U, +U, -D", c.Name, k)
	}
	return k, ""
}

// With returns a copy of row with its kind set to k.
func (c KindColumn) With(row any, k rowkind.Kind) any {
	src := reflect.ValueOf(row)
	cp := reflect.New(src.Type()).Elem()
	cp.Set(src)
	if c.isKind {
		cp.Field(c.index).SetInt(int64(k))
	} else {
		cp.Field(c.index).SetString(k.String())
	}
	return cp.Interface()
}

// SeqColumn reads a SequenceBy column of a struct row type as its
// order-preserving bytes (coders/ordercoder): a signed or unsigned
// integer, a float, a time.Time (to the microsecond, as OnTime) or a
// string, or a pointer to one; a nil pointer is NULL.
type SeqColumn struct {
	Name  string
	index int
	ptr   bool
	kind  reflect.Kind // Int64 (signed), Uint64, Float64, String, or Struct for time.Time
}

// NewSeqColumn finds column col of struct type t and checks its type; the
// error names the option (SequenceBy).
func NewSeqColumn(t reflect.Type, col string) (SeqColumn, error) {
	c, err := lookup(t, "SequenceBy", col)
	if err != nil {
		return SeqColumn{}, err
	}
	ft, ptr := deref(c.Type)
	f := SeqColumn{Name: col, index: c.Index, ptr: ptr}
	switch ft.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		f.kind = reflect.Int64
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		f.kind = reflect.Uint64
	case reflect.Float32, reflect.Float64:
		f.kind = reflect.Float64
	case reflect.String:
		f.kind = reflect.String
	default:
		if ft != timeType {
			return SeqColumn{}, fmt.Errorf("SequenceBy(%q): the column has type %v; it must be a signed or unsigned integer, a float, a time.Time or a string (or a pointer to one)", col, c.Type)
		}
		f.kind = reflect.Struct
	}
	return f, nil
}

// Append appends the ordering value of row (a struct value of the
// column's type) to dst, or returns the reason it has none (NULL), naming
// the column; dst is then unchanged.
func (f SeqColumn) Append(dst []byte, row reflect.Value) ([]byte, string) {
	v := row.Field(f.index)
	if f.ptr {
		if v.IsNil() {
			return dst, fmt.Sprintf("SequenceBy column %q is NULL", f.Name)
		}
		v = v.Elem()
	}
	switch f.kind {
	case reflect.Int64:
		return ordercoder.Int(dst, v.Int()), ""
	case reflect.Uint64:
		return ordercoder.Uint(dst, v.Uint()), ""
	case reflect.Float64:
		return ordercoder.Float(dst, v.Float()), ""
	case reflect.String:
		return ordercoder.String(dst, v.String()), ""
	}
	return ordercoder.Time(dst, v.Interface().(time.Time).Truncate(time.Microsecond)), ""
}

// Columns are the kind, OnTime and SequenceBy columns of a rowspec.Spec resolved
// against a struct row type; a role the Spec does not name is nil. (The
// key's columns are coders/keycoder's.)
type Columns struct {
	Kind *KindColumn
	Time *TimeColumn
	Seq  *SeqColumn
}

// Resolve checks s (Err) and finds its kind, OnTime and SequenceBy columns
// in struct type t, reporting every problem at once.
func Resolve(s rowspec.Spec, t reflect.Type) (Columns, error) {
	var c Columns
	errs := []error{Err(s)}
	if s.Kind != "" {
		k, err := NewKindColumn(t, s.Kind)
		c.Kind, errs = &k, append(errs, err)
	}
	if s.OnTime != "" {
		tc, err := NewTimeColumn(t, s.OnTime)
		c.Time, errs = &tc, append(errs, err)
	}
	if s.SequenceBy != "" {
		sc, err := NewSeqColumn(t, s.SequenceBy)
		c.Seq, errs = &sc, append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return Columns{}, err
	}
	return c, nil
}

// Values are what Columns.Read reads of a row.
type Values struct {
	Kind rowkind.Kind // +I without a kind column
	// Order is the row's place in its key's order: its SequenceBy value,
	// its OnTime value (0 without OnTime: a transform puts the row's event
	// time there) and whether it is a retraction.
	Order   Order
	HasTime bool // the Spec has an OnTime column
}

// Read reads row's kind, SequenceBy and OnTime values, appending the
// SequenceBy value to seq (Order.Seq is the appended bytes), or returns
// the reason the row cannot be ordered: an unknown kind, a NULL SequenceBy
// or OnTime value, a time outside Beam's range.
func (c Columns) Read(row reflect.Value, seq []byte) (Values, string) {
	v := Values{Kind: rowkind.Insert}
	var reason string
	if c.Kind != nil {
		if v.Kind, reason = c.Kind.Read(row); reason != "" {
			return Values{}, reason
		}
		v.Order.Retraction = v.Kind.IsRetraction()
	}
	if c.Seq != nil {
		if v.Order.Seq, reason = c.Seq.Append(seq, row); reason != "" {
			return Values{}, reason
		}
	}
	if c.Time != nil {
		if v.Order.Time, reason = c.Time.Read(row); reason != "" {
			return Values{}, reason
		}
		v.HasTime = true
	}
	return v, ""
}

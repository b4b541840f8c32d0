package ordercoder

import (
	"fmt"
	"reflect"
	"time"

	"github.com/beamdedup/beamdedup/coders/keycoder"
)

// Column reads an ordering column of a struct row type (a SequenceBy
// column) as its order-preserving bytes. The field is resolved once, by
// NewColumn; a nil pointer is NULL.
type Column struct {
	index int
	ptr   bool
	kind  reflect.Kind // Int64 (signed), Uint64, Float64, String, or Struct for time.Time
}

var timeType = reflect.TypeFor[time.Time]()

// NewColumn finds column col (its `beam:"name"` tag, else the field name)
// of struct type t and checks that it is a signed or unsigned integer, a
// float, a time.Time or a string, or a pointer to one.
func NewColumn(t reflect.Type, col string) (Column, error) {
	c, err := keycoder.Lookup(t, col)
	if err != nil {
		return Column{}, err
	}
	ft, ptr := c.Type, false
	if ft.Kind() == reflect.Pointer {
		ft, ptr = ft.Elem(), true
	}
	f := Column{index: c.Index, ptr: ptr}
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
			return Column{}, fmt.Errorf("column %q has type %v; an ordering column must be a signed or unsigned integer, a float, a time.Time or a string (or a pointer to one)", col, c.Type)
		}
		f.kind = reflect.Struct
	}
	return f, nil
}

// Append appends the ordering value of row (a struct value of the
// column's type) to dst; ok is false for NULL, and dst is then unchanged.
func (f Column) Append(dst []byte, row reflect.Value) (_ []byte, ok bool) {
	v := row.Field(f.index)
	if f.ptr {
		if v.IsNil() {
			return dst, false
		}
		v = v.Elem()
	}
	switch f.kind {
	case reflect.Int64:
		return Int(dst, v.Int()), true
	case reflect.Uint64:
		return Uint(dst, v.Uint()), true
	case reflect.Float64:
		return Float(dst, v.Float()), true
	case reflect.String:
		return String(dst, v.String()), true
	}
	return Time(dst, v.Interface().(time.Time)), true
}

// Package rowspec is the vocabulary of the roles a row's columns play in
// beamdedup's transforms: the key (PARTITION BY), the kind (+I, -U, +U,
// -D), the event time (OnTime) and the ordering column (SequenceBy). A
// pipeline states them once, as a Spec, and hands the same Spec to dedup,
// changelog and pgsink (each takes it through its option named Spec), so
// the sink orders and keys rows as the deduplication that fed it did:
//
//	spec := rowspec.Spec{Key: []string{"order_id"}, OnTime: "ts", Kind: "op"}
//	res := dedup.KeepLast(s, events, dedup.Spec(spec))
//	pgsink.Write(s, res.Rows, pgsink.Spec(res.Spec), pgsink.DSN(dsn), pgsink.Table("order_status"))
//
// It has no Beam imports.
package rowspec

import (
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/beamdedup/beamdedup/coders/keycoder"
)

// Spec names the columns of a row type by role. A column's name is its
// `beam:"name"` tag, else the field name. An empty field is a role the
// rows do not have.
type Spec struct {
	// Key are the key columns: rows with equal values in all of them are
	// one key (NULLs equal each other). None: one global key.
	Key []string
	// Kind is the column holding each row's kind: a string ("+I", "-U",
	// "+U", "-D"; "" reads as +I) or a rowkind.Kind.
	Kind string
	// OnTime is the event-time column: a time.Time or int64 Unix
	// milliseconds (or a pointer to one).
	OnTime string
	// SequenceBy is the ordering column: a signed or unsigned integer, a
	// float, a time.Time or a string (or a pointer to one).
	SequenceBy string
}

// Err reports every way s is inconsistent in itself, naming the roles as
// their options are named: an empty column name, a key column listed
// twice, a column in two roles.
func (s Spec) Err() error {
	var errs []error
	role := map[string]string{}
	claim := func(r, col string) {
		if col == "" {
			return
		}
		if other, ok := role[col]; ok {
			errs = append(errs, fmt.Errorf("column %q is both %s and %s; a column has one role", col, other, r))
			return
		}
		role[col] = r
	}
	for _, k := range s.Key {
		if k == "" {
			errs = append(errs, fmt.Errorf("PartitionBy(%q): a column name is empty", s.Key))
			continue
		}
		if role[k] == "PartitionBy" {
			errs = append(errs, fmt.Errorf("PartitionBy names column %q twice; list each key column once", k))
			continue
		}
		claim("PartitionBy", k)
	}
	claim("KindColumn", s.Kind)
	claim("OnTime", s.OnTime)
	claim("SequenceBy", s.SequenceBy)
	return errors.Join(errs...)
}

// Check reports every role whose column the struct type t lacks, with the
// columns t has.
func (s Spec) Check(t reflect.Type) error {
	var errs []error
	lookup := func(option, col string) {
		if col == "" {
			return
		}
		if _, err := keycoder.Lookup(t, col); err != nil {
			errs = append(errs, fmt.Errorf("%s(%q): %w", option, col, err))
		}
	}
	for _, k := range s.Key {
		lookup("PartitionBy", k)
	}
	lookup("KindColumn", s.Kind)
	lookup("OnTime", s.OnTime)
	lookup("SequenceBy", s.SequenceBy)
	return errors.Join(errs...)
}

var (
	timeType  = reflect.TypeFor[time.Time]()
	int64Type = reflect.TypeFor[int64]()
)

// TimeColumn reads an OnTime column of a struct row type: a time.Time or
// an int64 of Unix milliseconds, or a pointer to one. It is the one
// reader of the role: dedup takes a row's event time from it, pgsink its
// guard's value.
type TimeColumn struct {
	Name  string
	index int
	ptr   bool
	isInt bool
}

// NewTimeColumn finds column col of struct type t and checks its type; the
// error names the option (OnTime).
func NewTimeColumn(t reflect.Type, col string) (TimeColumn, error) {
	c, err := keycoder.Lookup(t, col)
	if err != nil {
		return TimeColumn{}, fmt.Errorf("OnTime(%q): %w", col, err)
	}
	ft, ptr := c.Type, false
	if ft.Kind() == reflect.Pointer {
		ft, ptr = ft.Elem(), true
	}
	switch ft {
	case timeType:
		return TimeColumn{Name: col, index: c.Index, ptr: ptr}, nil
	case int64Type:
		return TimeColumn{Name: col, index: c.Index, ptr: ptr, isInt: true}, nil
	}
	return TimeColumn{}, fmt.Errorf("OnTime(%q): the column has type %v; it must be time.Time or int64 Unix milliseconds (or a pointer to one)", col, c.Type)
}

// IsInt reports whether the column holds int64 Unix milliseconds rather
// than a time.Time.
func (c TimeColumn) IsInt() bool { return c.isInt }

// Read returns the column's value in row (a struct value of the column's
// type): a time.Time, or for an int64 column the instant of its
// milliseconds, with ms its Unix milliseconds; or a reason it has none,
// naming the column: NULL (a nil pointer) or the zero time.Time.
func (c TimeColumn) Read(row reflect.Value) (t time.Time, ms int64, reason string) {
	v := row.Field(c.index)
	if c.ptr {
		if v.IsNil() {
			return time.Time{}, 0, fmt.Sprintf("OnTime column %q is NULL", c.Name)
		}
		v = v.Elem()
	}
	if c.isInt {
		ms = v.Int()
		return time.UnixMilli(ms), ms, ""
	}
	t = v.Interface().(time.Time)
	if t.IsZero() {
		return time.Time{}, 0, fmt.Sprintf("OnTime column %q holds the zero time.Time (no time was set)", c.Name)
	}
	return t, t.UnixMilli(), ""
}

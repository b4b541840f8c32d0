// Package rowspec is beamdedup's row model: the roles a row's columns play
// (the key, PARTITION BY; the kind, +I, -U, +U, -D; the event time,
// OnTime; the ordering column, SequenceBy), how each role's column is read,
// and the one comparator that says which of a key's rows wins.
//
// A pipeline states the roles once, as a Spec, and hands the same Spec to
// dedup, changelog and pgsink (each takes it through its option named
// Spec), so the sink orders and keys rows as the deduplication that fed it
// did:
//
//	spec := rowspec.Spec{Key: []string{"order_id"}, OnTime: "ts", Kind: "op"}
//	res := dedup.KeepLast(s, events, dedup.Spec(spec))
//	pgsink.Write(s, res.Rows, pgsink.Spec(res.Spec), pgsink.DSN(dsn), pgsink.Table("order_status"))
//
// Every transform reads a role's column with this package's reader
// (KindColumn, TimeColumn, SeqColumn, or all of them at once with
// Spec.Resolve): one set of accepted types, one validation and one text
// for each error. Every transform and the sink compare rows with Order
// (order.go), whose tie rules are written there once.
//
// It has no Beam imports.
package rowspec

import (
	"errors"
	"fmt"
	"reflect"

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
	// milliseconds (or a pointer to one). Rows compare by its value to
	// the microsecond (a time.Time) or the millisecond (an int64).
	OnTime string
	// SequenceBy is the ordering column: a signed or unsigned integer, a
	// float, a time.Time (compared to the microsecond) or a string (or a
	// pointer to one).
	SequenceBy string
	// Upsert says that each row replaces its key's row, with no -U rows
	// (dedup.KeepLast's Upsert output): a sink upserts it. Without Kind
	// and Upsert the rows are insert-only: a key's first row stands.
	Upsert bool
}

// Err reports every way s is inconsistent in itself, naming the roles as
// their options are named: an empty column name, a key column listed
// twice, a column in two roles. It is the one duplicate-column check of
// every transform and the sink.
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
	for _, k := range s.Key {
		if _, err := lookup(t, "PartitionBy", k); err != nil {
			errs = append(errs, err)
		}
	}
	for _, r := range [...]struct{ option, col string }{{"KindColumn", s.Kind}, {"OnTime", s.OnTime}, {"SequenceBy", s.SequenceBy}} {
		if r.col == "" {
			continue
		}
		if _, err := lookup(t, r.option, r.col); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// lookup finds column col of struct type t for the role option names; the
// error names the option and lists t's columns.
func lookup(t reflect.Type, option, col string) (keycoder.Column, error) {
	c, err := keycoder.Lookup(t, col)
	if err != nil {
		return keycoder.Column{}, fmt.Errorf("%s(%q): %w", option, col, err)
	}
	return c, nil
}

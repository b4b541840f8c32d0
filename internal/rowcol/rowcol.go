// Package rowcol reads the columns of a row by the roles a rowspec.Spec
// gives them (the kind, OnTime and SequenceBy columns, each by one reader
// with one set of accepted types and one text for each error), and holds
// the one comparator of a key's rows (order.go), for dedup, changelog and
// the PostgreSQL sink. It has no Beam imports.
package rowcol

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/beamdedup/beamdedup/coders/keycoder"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// Err reports every way s is inconsistent in itself, naming the roles as
// their options are named: an empty column name, a key column listed
// twice, a column in two roles. It is the one duplicate-column check of
// every transform and the sink.
func Err(s rowspec.Spec) error {
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

// lookup finds column col of struct type t for the role option names; the
// error names the option and lists t's columns.
func lookup(t reflect.Type, option, col string) (keycoder.Column, error) {
	c, err := keycoder.Lookup(t, col)
	if err != nil {
		return keycoder.Column{}, fmt.Errorf("%s(%q): %w", option, col, err)
	}
	return c, nil
}

package dedup

import (
	"fmt"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"

	"github.com/beamdedup/beamdedup/coders/ordercoder"
	"github.com/beamdedup/beamdedup/transforms/rowkind"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// timeField reads the OnTime column of a row as Unix milliseconds within
// Beam's timestamp range (rowspec.TimeColumn reads the column).
type timeField struct{ col rowspec.TimeColumn }

func newTimeField(t reflect.Type, col string) (timeField, error) {
	c, err := rowspec.NewTimeColumn(t, col)
	return timeField{c}, err
}

// millis returns the event time of row, or a reason it has none.
func (f timeField) millis(row reflect.Value) (int64, string) {
	_, ms, reason := f.col.Read(row)
	if reason != "" {
		return 0, reason
	}
	if ms < int64(mtime.MinTimestamp) || ms >= int64(mtime.MaxTimestamp) {
		return 0, fmt.Sprintf("OnTime column %q: event time %d ms is outside Beam's timestamp range", f.col.Name, ms)
	}
	return ms, ""
}

// kindField reads and rewrites the KindColumn of a row.
type kindField struct {
	col  rowkind.Column
	name string
}

func newKindField(t reflect.Type, col string) (kindField, error) {
	c, err := rowkind.NewColumn(t, col)
	if err != nil {
		return kindField{}, fmt.Errorf("KindColumn(%q): %w", col, err)
	}
	return kindField{col: c, name: col}, nil
}

// optionalKindField is newKindField for a column that may be unset ("").
func optionalKindField(t reflect.Type, col string) (*kindField, error) {
	return optionalField(t, col, newKindField)
}

// optionalField is a field accessor constructor for a column that may be
// unset (""): nil then.
func optionalField[F any](t reflect.Type, col string, newField func(reflect.Type, string) (F, error)) (*F, error) {
	if col == "" {
		return nil, nil
	}
	f, err := newField(t, col)
	if err != nil {
		return nil, err
	}
	return &f, nil
}

// kind returns the row's kind, or a reason it has none.
func (f kindField) kind(row reflect.Value) (rowkind.Kind, string) {
	k, err := f.col.Kind(row)
	if err != nil {
		return 0, fmt.Sprintf("KindColumn %q: %v", f.name, err)
	}
	return k, ""
}

// withKind returns a copy of row with its kind set to k.
func (f kindField) withKind(row any, k rowkind.Kind) any { return f.col.With(row, k) }

// seqField reads the SequenceBy column of a row as order-preserving bytes
// (coders/ordercoder).
type seqField struct {
	col        ordercoder.Column
	nullReason string
}

func newSeqField(t reflect.Type, col string) (seqField, error) {
	c, err := ordercoder.NewColumn(t, col)
	if err != nil {
		return seqField{}, fmt.Errorf("SequenceBy(%q): %w", col, err)
	}
	return seqField{col: c, nullReason: fmt.Sprintf("SequenceBy column %q is NULL", col)}, nil
}

// optionalSeqField is newSeqField for a column that may be unset ("").
func optionalSeqField(t reflect.Type, col string) (*seqField, error) {
	return optionalField(t, col, newSeqField)
}

// appendTo appends the row's ordering value to dst, or returns a reason it
// has none.
func (f seqField) appendTo(dst []byte, row reflect.Value) ([]byte, string) {
	dst, ok := f.col.Append(dst, row)
	if !ok {
		return dst, f.nullReason
	}
	return dst, ""
}

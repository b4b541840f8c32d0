package step

import (
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"

	"github.com/beamdedup/beamdedup/internal/micros"
	"github.com/beamdedup/beamdedup/internal/rowcol"
	"github.com/beamdedup/beamdedup/transforms/dedup/internal/core"
	"github.com/beamdedup/beamdedup/transforms/rowkind"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// How the steps read a row's roles: the kind, OnTime and SequenceBy
// columns through rowspec's readers (rowcol.Columns), which every
// transform and the sink share.

// Columns are the kind, OnTime and SequenceBy columns of a step's row
// type: the one reader of a row's roles in dedup, set up at construction
// (to check the options against the row type) and on the workers.
type Columns struct {
	// TimeCol, KindCol and SeqCol name the OnTime, kind and SequenceBy
	// columns ("" where the transform has none).
	TimeCol, KindCol, SeqCol string

	cols rowcol.Columns
}

// Setup resolves the columns in row type t.
func (c *Columns) Setup(t reflect.Type) error {
	var err error
	c.cols, err = rowcol.Resolve(rowspec.Spec{Kind: c.KindCol, OnTime: c.TimeCol, SequenceBy: c.SeqCol}, t)
	return err
}

// any reports whether there is a column to read.
func (c *Columns) any() bool { return c.cols.Time != nil || c.cols.Kind != nil || c.cols.Seq != nil }

// checked is what Columns.check reads of a row.
type checked struct {
	ts     beam.EventTime // the OnTime column's millisecond, else the element's timestamp
	micros uint16         // the OnTime value's microseconds past ts
	onTime bool           // ts is the OnTime column's, not the element's
	kind   rowkind.Kind   // the kind column, else +I
	seq    []byte         // the SequenceBy value (appended to check's seq), else nil
}

// row is the row as the rules see it (its Row encoding aside).
func (c checked) row() core.Row {
	return core.Row{Kind: c.kind, Time: int64(c.ts), Micros: c.micros, Stamped: !c.onTime, Seq: c.seq}
}

// check reads the row's event time, kind and sequence value, appending the
// latter to seq, or returns a reason to reject it. ts is the element's
// timestamp, the event time without OnTime.
func (c *Columns) check(ts beam.EventTime, v reflect.Value, seq []byte) (checked, string) {
	vals, reason := c.cols.Read(v, seq)
	if reason != "" {
		return checked{}, reason
	}
	r := checked{ts: ts, kind: vals.Kind, seq: vals.Order.Seq}
	if vals.HasTime {
		// Within Beam's timestamp range (micros.MinMillis, MaxMillis).
		ms, us := micros.Split(vals.Order.Time)
		r.ts, r.micros, r.onTime = mtime.Time(ms), us, true
	}
	return r, ""
}

// optionalKind is the kind column col of row type t, or nil for "".
func optionalKind(t reflect.Type, col string) (*rowcol.KindColumn, error) {
	if col == "" {
		return nil, nil
	}
	c, err := rowcol.NewKindColumn(t, col)
	return &c, err
}

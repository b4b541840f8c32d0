package pgsink

import (
	"fmt"
	"reflect"
	"time"

	"github.com/beamdedup/beamdedup/coders/keycoder"
	"github.com/beamdedup/beamdedup/coders/ordercoder"
	"github.com/beamdedup/beamdedup/transforms/rowkind"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// layout is what the sink reads from a row type, resolved once: the
// columns it writes, the key encoder that folds a batch per key, the kind
// column and the ordering columns.
type layout struct {
	t      reflect.Type
	cols   []rowColumn // written columns, in field order (the kind column is not written)
	keys   []int       // indexes into cols of the key columns, in PartitionBy order
	keyEnc *keycoder.Encoder
	kind   *rowkind.Column
	// kindName is the kind column's name, for dead letters.
	kindName string
	order    []orderField
}

type rowColumn struct {
	name  string
	index int          // struct field index
	typ   reflect.Type // field type
	ptr   bool         // a pointer: nil is NULL
}

// orderField reads one ordering column as ordercoder bytes, or the reason
// a row has none (NULL).
type orderField struct {
	name string
	read func(dst []byte, row reflect.Value) (_ []byte, reason string)
}

var timeType = reflect.TypeFor[time.Time]()

func newLayout(t reflect.Type, c *config) (*layout, error) {
	if t == nil || t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("rows must be a PCollection of a struct type, got %v", t)
	}
	all, err := keycoder.Columns(t)
	if err != nil {
		return nil, err
	}
	l := &layout{t: t}
	if l.keyEnc, err = keycoder.New(t, c.keys); err != nil {
		return nil, fmt.Errorf("PartitionBy(%q): %w", c.keys, err)
	}
	if c.kindCol != "" {
		kc, err := rowkind.NewColumn(t, c.kindCol)
		if err != nil {
			return nil, fmt.Errorf("KindColumn(%q): %w", c.kindCol, err)
		}
		l.kind, l.kindName = &kc, c.kindCol
	}
	pos := map[string]int{}
	for _, col := range all {
		if col.Name == c.kindCol {
			continue
		}
		if col.Name == c.tombstone {
			return nil, fmt.Errorf("Tombstone(%q) names a column of the row type; the sink sets the tombstone column itself, so it must be a table column only", c.tombstone)
		}
		pos[col.Name] = len(l.cols)
		l.cols = append(l.cols, rowColumn{name: col.Name, index: col.Index, typ: col.Type, ptr: col.Type.Kind() == reflect.Pointer})
	}
	for _, k := range c.keys {
		l.keys = append(l.keys, pos[k])
	}
	for _, name := range c.orderColumns() {
		f, err := newOrderField(t, name, name == c.timeCol && c.seqCol != name)
		if err != nil {
			return nil, err
		}
		l.order = append(l.order, f)
	}
	return l, nil
}

// newOrderField resolves an ordering column: SequenceBy's as dedup reads it
// (ordercoder.Column: integers, floats, time.Time and strings); OnTime's as
// dedup reads it (rowspec.TimeColumn: time.Time or int64 Unix
// milliseconds), a time at the precision the table keeps.
func newOrderField(t reflect.Type, name string, onTime bool) (orderField, error) {
	if !onTime {
		c, err := ordercoder.NewColumn(t, name)
		if err != nil {
			return orderField{}, fmt.Errorf("SequenceBy(%q): %w", name, err)
		}
		null := fmt.Sprintf("NULL ordering value in column %s", name)
		return orderField{name: name, read: func(dst []byte, row reflect.Value) ([]byte, string) {
			dst, ok := c.Append(dst, row)
			if !ok {
				return dst, null
			}
			return dst, ""
		}}, nil
	}
	c, err := rowspec.NewTimeColumn(t, name)
	if err != nil {
		return orderField{}, err
	}
	return orderField{name: name, read: func(dst []byte, row reflect.Value) ([]byte, string) {
		tm, ms, reason := c.Read(row)
		switch {
		case reason != "":
			return dst, reason
		case c.IsInt():
			return ordercoder.Int(dst, ms), ""
		}
		// The table keeps microseconds (pgx truncates to them): compare
		// at that precision, as the guard in SQL does.
		return ordercoder.Time(dst, tm.Truncate(time.Microsecond)), ""
	}}, nil
}

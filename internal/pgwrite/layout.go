package pgwrite

import (
	"fmt"
	"reflect"

	"github.com/beamdedup/beamdedup/coders/keycoder"
	"github.com/beamdedup/beamdedup/internal/rowcol"
)

// layout is what the sink reads from a row type, resolved once: the
// columns it writes, the key encoder that folds a batch per key, and the
// kind and ordering columns, read as dedup reads them (rowcol.Columns).
type layout struct {
	t      reflect.Type
	cols   []rowColumn // written columns, in field order (the kind column is not written)
	keys   []int       // indexes into cols of the key columns, in PartitionBy order
	keyEnc *keycoder.Encoder
	// roles are the kind, OnTime and SequenceBy columns; order is the
	// guard's columns by name, compared in this order (SequenceBy, then
	// OnTime), as rowcol.Order compares them.
	roles rowcol.Columns
	order []string
}

type rowColumn struct {
	name  string
	index int          // struct field index
	typ   reflect.Type // field type
	ptr   bool         // a pointer: nil is NULL
}

func newLayout(t reflect.Type, c *Config) (*layout, error) {
	if t == nil || t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("rows must be a PCollection of a struct type, got %v", t)
	}
	all, err := keycoder.Columns(t)
	if err != nil {
		return nil, err
	}
	l := &layout{t: t, order: c.orderColumns()}
	if l.keyEnc, err = keycoder.New(t, c.Roles.Key); err != nil {
		return nil, fmt.Errorf("PartitionBy(%q): %w", c.Roles.Key, err)
	}
	if l.roles, err = rowcol.Resolve(c.Roles, t); err != nil {
		return nil, err
	}
	pos := map[string]int{}
	for _, col := range all {
		if col.Name == c.Roles.Kind {
			continue
		}
		if col.Name == c.Tombstone {
			return nil, fmt.Errorf("Tombstone(%q) names a column of the row type; the sink sets the tombstone column itself, so it must be a table column only", c.Tombstone)
		}
		pos[col.Name] = len(l.cols)
		l.cols = append(l.cols, rowColumn{name: col.Name, index: col.Index, typ: col.Type, ptr: col.Type.Kind() == reflect.Pointer})
	}
	for _, k := range c.Roles.Key {
		l.keys = append(l.keys, pos[k])
	}
	return l, nil
}

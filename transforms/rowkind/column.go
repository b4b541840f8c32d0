package rowkind

import (
	"fmt"
	"reflect"

	"github.com/beamdedup/beamdedup/coders/keycoder"
)

var kindType = reflect.TypeFor[Kind]()

// Column reads and writes the kind column of a struct row type: a string
// holding +I, -U, +U or -D, or a Kind. The zero value of either, "" or
// Insert, reads as +I: a row that never set its kind is an insert.
type Column struct {
	index  int
	isKind bool // a Kind, else a string
}

// NewColumn finds column col of struct type t and checks its type.
func NewColumn(t reflect.Type, col string) (Column, error) {
	c, err := keycoder.Lookup(t, col)
	if err != nil {
		return Column{}, err
	}
	switch {
	case c.Type == kindType:
		return Column{index: c.Index, isKind: true}, nil
	case c.Type.Kind() == reflect.String:
		return Column{index: c.Index}, nil
	}
	return Column{}, fmt.Errorf("kind column %q has type %v; it must be a string (\"+I\", \"-U\", \"+U\", \"-D\") or a rowkind.Kind", col, c.Type)
}

// Kind returns the kind of row (a struct value of the column's type), or
// an error that names the accepted forms.
func (c Column) Kind(row reflect.Value) (Kind, error) {
	v := row.Field(c.index)
	if !c.isKind {
		if v.Len() == 0 {
			return Insert, nil
		}
		return Parse(v.String())
	}
	k := Kind(v.Int())
	if !k.Valid() {
		return 0, fmt.Errorf("unknown row kind %v: want one of +I, -U, +U, -D", k)
	}
	return k, nil
}

// With returns a copy of row with its kind set to k.
func (c Column) With(row any, k Kind) any {
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

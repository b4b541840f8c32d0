package dedup

import (
	"fmt"
	"reflect"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"

	"github.com/beamdedup/beamdedup/coders/keycoder"
	"github.com/beamdedup/beamdedup/transforms/changelog"
	"github.com/beamdedup/beamdedup/transforms/dedup/core"
)

var (
	timeType  = reflect.TypeFor[time.Time]()
	kindType  = reflect.TypeFor[changelog.Kind]()
	int64Type = reflect.TypeFor[int64]()
)

// timeField reads the OnTime column of a row as Unix milliseconds.
type timeField struct {
	index int
	ptr   bool
	isInt bool
}

func newTimeField(t reflect.Type, col string) (timeField, error) {
	c, err := keycoder.Lookup(t, col)
	if err != nil {
		return timeField{}, fmt.Errorf("OnTime: %w", err)
	}
	ft, ptr := c.Type, false
	if ft.Kind() == reflect.Pointer {
		ft, ptr = ft.Elem(), true
	}
	switch {
	case ft == timeType:
		return timeField{index: c.Index, ptr: ptr}, nil
	case ft == int64Type:
		return timeField{index: c.Index, ptr: ptr, isInt: true}, nil
	}
	return timeField{}, fmt.Errorf("OnTime column %q has type %v; it must be time.Time or int64 Unix milliseconds (or a pointer to one)", col, c.Type)
}

// millis returns the event time of row, or a reason it has none.
func (f timeField) millis(row reflect.Value) (int64, string) {
	v := row.Field(f.index)
	if f.ptr {
		if v.IsNil() {
			return 0, "event time column is NULL"
		}
		v = v.Elem()
	}
	var ms int64
	if f.isInt {
		ms = v.Int()
	} else {
		ms = v.Interface().(time.Time).UnixMilli()
	}
	if ms < int64(mtime.MinTimestamp) || ms >= int64(mtime.MaxTimestamp) {
		return 0, fmt.Sprintf("event time %d ms is outside Beam's timestamp range", ms)
	}
	return ms, ""
}

// kindField reads and rewrites the Changelog column of a row.
type kindField struct {
	index  int
	isKind bool // changelog.Kind, else a string kind
}

func newKindField(t reflect.Type, col string) (kindField, error) {
	c, err := keycoder.Lookup(t, col)
	if err != nil {
		return kindField{}, fmt.Errorf("Changelog: %w", err)
	}
	switch {
	case c.Type == kindType:
		return kindField{index: c.Index, isKind: true}, nil
	case c.Type.Kind() == reflect.String:
		return kindField{index: c.Index}, nil
	}
	return kindField{}, fmt.Errorf("Changelog column %q has type %v; it must be a string (\"+I\", \"-U\", \"+U\", \"-D\") or a changelog.Kind", col, c.Type)
}

// optionalKindField is newKindField for a column that may be unset ("").
func optionalKindField(t reflect.Type, col string) (*kindField, error) {
	if col == "" {
		return nil, nil
	}
	kf, err := newKindField(t, col)
	if err != nil {
		return nil, err
	}
	return &kf, nil
}

// kind returns the row's kind, or a reason it has none.
func (f kindField) kind(row reflect.Value) (core.Kind, string) {
	v := row.Field(f.index)
	var k changelog.Kind
	if f.isKind {
		k = changelog.Kind(v.Int())
		if !k.Valid() {
			return 0, fmt.Sprintf("unknown row kind %v: want one of +I, -U, +U, -D", k)
		}
	} else {
		var err error
		if k, err = changelog.Parse(v.String()); err != nil {
			return 0, err.Error()
		}
	}
	return coreKind(k), ""
}

func coreKind(k changelog.Kind) core.Kind {
	switch k {
	case changelog.UpdateBefore:
		return core.UpdateBefore
	case changelog.UpdateAfter:
		return core.UpdateAfter
	case changelog.Delete:
		return core.Delete
	}
	return core.Insert
}

// asInsert returns a copy of row with its kind set to +I: the output of
// KeepFirst is insert-only.
func (f kindField) asInsert(row any) any {
	src := reflect.ValueOf(row)
	cp := reflect.New(src.Type()).Elem()
	cp.Set(src)
	if f.isKind {
		cp.Field(f.index).SetInt(int64(changelog.Insert))
	} else {
		cp.Field(f.index).SetString(changelog.Insert.String())
	}
	return cp.Interface()
}

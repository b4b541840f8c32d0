// Package count is what CountPerKey's workers run, apart from the DoFn
// types package changelog keeps: how a row is read (Columns), the rule of
// the count (Sign, Match) and the counters (Metrics).
package count

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamdedup/beamdedup/coders/keycoder"
	"github.com/beamdedup/beamdedup/internal/rowcol"
	"github.com/beamdedup/beamdedup/transforms/rowkind"
)

// Columns read a row's kind, group and key; resolved once per row type.
type Columns struct {
	kind   rowcol.KindColumn
	enc    *keycoder.Encoder
	keyEnc *keycoder.Encoder // nil without a key
	groups []int             // field indexes of the GroupBy columns
}

// NewColumns resolves the kind, GroupBy and key columns of struct type t;
// the error names the option at fault.
func NewColumns(t reflect.Type, kindCol string, groupBy, key []string) (*Columns, error) {
	if kindCol == "" {
		return nil, errors.New("KindColumn is required: name the column holding +I, -U, +U, -D")
	}
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("input must be a PCollection of a Go struct type, got %v", t)
	}
	kc, err := rowcol.NewKindColumn(t, kindCol)
	if err != nil {
		return nil, err
	}
	enc, err := keycoder.New(t, groupBy)
	if err != nil {
		return nil, fmt.Errorf("GroupBy(%q): %w", groupBy, err)
	}
	c := &Columns{kind: kc, enc: enc}
	if len(key) > 0 {
		if c.keyEnc, err = keycoder.New(t, key); err != nil {
			return nil, fmt.Errorf("PartitionBy(%q): %w", key, err)
		}
	}
	for _, g := range groupBy {
		col, err := keycoder.Lookup(t, g)
		if err != nil {
			return nil, fmt.Errorf("GroupBy(%q): %w", groupBy, err)
		}
		c.groups = append(c.groups, col.Index)
	}
	return c, nil
}

// Change is what a row contributes to its group; Key, the encoded group
// then key, is nil without a key.
type Change struct {
	Sign     int64
	Group    string
	GroupKey []byte
	Key      []byte
}

// Read reads row's change, or the reason it has none (an unknown kind).
func (c *Columns) Read(row reflect.Value) (Change, string) {
	k, reason := c.kind.Read(row)
	if reason != "" {
		return Change{}, reason
	}
	ch := Change{Sign: Sign(k), Group: c.group(row), GroupKey: c.enc.Append(nil, row)}
	if c.keyEnc != nil {
		k := append(binary.AppendUvarint(nil, uint64(len(ch.GroupKey))), ch.GroupKey...)
		ch.Key = c.keyEnc.Append(k, row)
	}
	return ch, ""
}

// Sign is the rule of the count: +1 for +I and +U, -1 for -U and -D.
func Sign(k rowkind.Kind) int64 {
	if k.IsRetraction() {
		return -1
	}
	return 1
}

// Match applies a key's summed changes of a group on bounded input (sum
// over rows rows): the retractions that outnumber its +I/+U rows are
// ignored.
func Match(sum, rows int64) (adds, rets, ignored int64) {
	adds, rets = (rows+sum)/2, (rows-sum)/2
	if rets > adds {
		ignored, rets = rets-adds, adds
	}
	return adds, rets, ignored
}

// BelowZero is the reason of a group whose count ends below zero.
func BelowZero(group string, count int64) string {
	return fmt.Sprintf("group %q ends below zero (%d): %d more -U/-D rows than +I/+U rows", group, count, -count)
}

func (c *Columns) group(row reflect.Value) string {
	switch len(c.groups) {
	case 0:
		return ""
	case 1:
		v := fieldValue(row, c.groups[0])
		if v == nil {
			return "NULL"
		}
		if t, ok := v.(time.Time); ok {
			return t.UTC().Format(time.RFC3339Nano)
		}
		return fmt.Sprint(v)
	}
	vals := make([]any, len(c.groups))
	for i, idx := range c.groups {
		vals[i] = fieldValue(row, idx)
	}
	b, _ := json.Marshal(vals)
	return string(b)
}

func fieldValue(row reflect.Value, idx int) any {
	v := row.Field(idx)
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return nil
		}
		v = v.Elem()
	}
	return v.Interface()
}

// The counters' names, in namespace beamdedup/changelog/<UID>.
const (
	Namespace          = "beamdedup/changelog"
	RowsIn             = "rows_in"
	Added              = "added"
	Subtracted         = "subtracted"
	RetractionsIgnored = "retractions_ignored"
	DeadLettered       = "dead_lettered"
	CountsEmitted      = "counts_emitted"
	GroupsBelowZero    = "groups_below_zero"
)

// Metrics are the counters of one CountPerKey.
type Metrics struct {
	RowsIn, Added, Subtracted, Ignored, Dead, Emitted, GroupsBelow0 beam.Counter
}

// NewMetrics are the counters of the CountPerKey named uid.
func NewMetrics(uid string) *Metrics {
	ns := Namespace + "/" + uid
	return &Metrics{
		RowsIn: beam.NewCounter(ns, RowsIn), Added: beam.NewCounter(ns, Added), Subtracted: beam.NewCounter(ns, Subtracted),
		Ignored: beam.NewCounter(ns, RetractionsIgnored), Dead: beam.NewCounter(ns, DeadLettered),
		Emitted: beam.NewCounter(ns, CountsEmitted), GroupsBelow0: beam.NewCounter(ns, GroupsBelowZero),
	}
}

// Applied counts a change applied: added or subtracted by its sign.
func (m *Metrics) Applied(ctx context.Context, sign int64) {
	if sign > 0 {
		m.Added.Inc(ctx, 1)
	} else {
		m.Subtracted.Inc(ctx, 1)
	}
}

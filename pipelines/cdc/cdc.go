// Package cdc turns a change log into an insert-only table of the first
// version of each key: the spec's section 4.1.3.7 ("updating input, changes
// swallowed") with rowspec.KindColumn.
//
// Input is JSON Lines with an op column, one change a line, either flat
//
//	{"op":"+I","user_name":"Vas","event":"login"}
//
// with op one of +I, -U, +U, -D (Flink's row kinds), or a Debezium change
// event, bare or inside a {"payload": ...} wrapper:
//
//	{"op":"c","before":null,"after":{"user_name":"Vas","event":"login"}}
//
// Debezium's op codes are mapped to row kinds: c (create) and r (snapshot
// read) → +I, u (update) → +U, d (delete) → -D. The row is taken from
// "after", and from "before" for a delete. Any other op value is kept
// as-is and dead-lettered by KeepFirst with the reason.
//
// Per user_name the first +I or +U is emitted, with op set to +I; every
// later change of that user is swallowed, and a -U/-D of a user not seen
// yet is ignored.
//
// Which change is "first": each change is stamped with its ts_ms column
// (Debezium's envelope ts_ms when the row has none). On a file KeepFirst
// keeps the +I/+U with the smallest timestamp per key, whatever the order
// of the lines, so give every change a ts_ms. On a stream it keeps the
// first in arrival order, which for a changelog partitioned by key (as
// Debezium's Kafka topics are) is the change order.
package cdc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beamdedup/beamdedup/pipelines/internal/pipeline"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// Change is one change of the user_events table.
type Change struct {
	Op       string `json:"op" beam:"op"`
	UserName string `json:"user_name" beam:"user_name"`
	Event    string `json:"event" beam:"event"`
	// TsMs is when the change happened, in Unix milliseconds (Debezium's
	// ts_ms); 0 if unknown. It becomes the row's timestamp.
	TsMs int64 `json:"ts_ms,omitempty" beam:"ts_ms"`
}

func init() {
	beam.RegisterType(reflect.TypeFor[Change]())
	register.Function2x2(stamp)
}

// stamp sets a change's timestamp from its ts_ms: Beam promises no order
// between elements, so without it the first change of a file would be
// arbitrary.
func stamp(ts beam.EventTime, c Change) (beam.EventTime, Change) {
	if c.TsMs > 0 {
		ts = mtime.FromMilliseconds(c.TsMs)
	}
	return ts, c
}

// DebeziumOps maps Debezium's op codes to Flink row kinds.
var DebeziumOps = map[string]string{"c": "+I", "r": "+I", "u": "+U", "d": "-D"}

// UnmarshalJSON reads a flat change or a Debezium change event.
func (c *Change) UnmarshalJSON(b []byte) error {
	var env struct {
		Op      string          `json:"op"`
		TsMs    int64           `json:"ts_ms"`
		Before  json.RawMessage `json:"before"`
		After   json.RawMessage `json:"after"`
		Payload json.RawMessage `json:"payload"`
	}
	if err := json.Unmarshal(b, &env); err != nil {
		return err
	}
	if env.Op == "" && isObject(env.Payload) {
		return c.UnmarshalJSON(env.Payload)
	}
	type flat Change // without this method
	row := b
	if kind, ok := DebeziumOps[env.Op]; ok {
		field := "after"
		row = env.After
		if kind == "-D" {
			row, field = env.Before, "before"
		}
		if !isObject(row) {
			return fmt.Errorf("Debezium op %q without a row in %q", env.Op, field)
		}
		env.Op = kind
	}
	var f flat
	if err := json.Unmarshal(row, &f); err != nil {
		return err
	}
	*c = Change(f)
	c.Op = env.Op
	if c.TsMs == 0 {
		c.TsMs = env.TsMs // Debezium's envelope time
	}
	return nil
}

func isObject(b json.RawMessage) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && b[0] == '{'
}

// Validate rejects changes without an op or user_name. Unknown op values
// pass, so that KeepFirst dead-letters them with its own reason.
func (c *Change) Validate() error {
	switch {
	case c.Op == "":
		return errors.New("missing op")
	case c.UserName == "":
		return errors.New("missing user_name")
	}
	return nil
}

// UID is the default UID of the pipeline's KeepFirst.
const UID = "cdc-dedup"

// Config configures Build: the files, and KeepFirst options applied
// after the defaults PartitionBy("user_name"), KindColumn("op") and
// UID(UID).
type Config = pipeline.Config

// Result holds the pipeline's collections: the parsed Changes, the first
// +I/+U per user_name with op "+I" (Out), and the dead letters
// (jsonl.ErrorLine).
type Result = pipeline.Result

// Build adds the change-log pipeline to s.
func Build(s beam.Scope, cfg Config) (Result, error) {
	return pipeline.BuildKeepFirst(s, "CDC", cfg, reflect.TypeFor[Change](), stampRows,
		rowspec.PartitionBy("user_name"), rowspec.KindColumn("op"), dedup.UID(UID))
}

// stampRows applies stamp to the parsed changes, before KeepFirst.
func stampRows(s beam.Scope, rows beam.PCollection) beam.PCollection {
	return beam.ParDo(s.Scope("Stamp"), stamp, rows)
}

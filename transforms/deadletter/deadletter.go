// Package deadletter is the one dead-letter type of beamdedup's transforms:
// a row that a transform could not process, or a sink could not write, with
// the reason and the transform that refused it. Every transform that refuses
// rows returns them as a PCollection of DeadLetter instead of failing the
// job or dropping them silently.
package deadletter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beamdedup/beamdedup/coders/keycoder"
)

func init() {
	beam.RegisterType(reflect.TypeFor[DeadLetter]())
	register.Emitter1[DeadLetter]()
}

// DeadLetter is a row a transform refused, with the reason.
type DeadLetter struct {
	Row       string `beam:"row" json:"row"`             // the row as JSON
	Reason    string `beam:"reason" json:"reason"`       // why it was refused
	Transform string `beam:"transform" json:"transform"` // the UID (scope name) of the transform that refused it
}

// New is the dead letter of row, refused by transform for reason. The row
// is written as RowJSON writes it.
func New(transform string, row any, reason string) DeadLetter {
	return DeadLetter{Row: RowJSON(row), Reason: reason, Transform: transform}
}

// RowJSON is row as a dead letter writes it: a struct row as a JSON object
// of its columns, under the names the transforms' options use (a field's
// `beam:"name"` tag, else its name), in field order; another value as
// encoding/json writes it; and a row JSON cannot represent with %+v.
func RowJSON(row any) string {
	if s, ok := columnsJSON(reflect.ValueOf(row)); ok {
		return s
	}
	b, err := json.Marshal(row)
	if err != nil {
		return fmt.Sprintf("%+v", row)
	}
	return string(b)
}

// KVJSON is a KV element as a dead letter writes it: {"key":…,"value":…},
// each as RowJSON writes it.
func KVJSON(key, value any) string {
	return `{"key":` + RowJSON(key) + `,"value":` + RowJSON(value) + "}"
}

// columnsJSON writes a struct value as a JSON object keyed by column name.
func columnsJSON(v reflect.Value) (string, bool) {
	if v.Kind() != reflect.Struct {
		return "", false
	}
	cols, err := keycoder.Columns(v.Type())
	if err != nil {
		return "", false
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for i, c := range cols {
		name, _ := json.Marshal(c.Name)
		val, err := json.Marshal(v.Field(c.Index).Interface())
		if err != nil {
			return "", false
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(name)
		b.WriteByte(':')
		b.Write(val)
	}
	b.WriteByte('}')
	return b.String(), true
}

// Package rowjson writes a row as a dead letter carries it
// (deadletter.DeadLetter.Row).
package rowjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/beamdedup/beamdedup/coders/keycoder"
)

// Row is row as a dead letter writes it: a struct row as a JSON object of
// its columns, under the names the transforms' options use (a field's
// `beam:"name"` tag, else its name), in field order; another value as
// encoding/json writes it; and a row JSON cannot represent with %+v.
func Row(row any) string {
	if s, ok := columnsJSON(reflect.ValueOf(row)); ok {
		return s
	}
	b, err := json.Marshal(row)
	if err != nil {
		return fmt.Sprintf("%+v", row)
	}
	return string(b)
}

// KV is a KV element as a dead letter writes it: {"key":…,"value":…},
// each as Row writes it.
func KV(key, value any) string {
	return `{"key":` + Row(key) + `,"value":` + Row(value) + "}"
}

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

package jsonl

import (
	"context"
	"reflect"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestErrorsPathReplacesJSONLExtension(t *testing.T) {
	for in, want := range map[string]string{
		"out/orders.jsonl":    "out/orders.errors.jsonl",
		"out/orders.json":     "out/orders.errors.jsonl",
		"gs://b/o/part.jsonl": "gs://b/o/part.errors.jsonl",
		"out/orders":          "out/orders.errors.jsonl",
		"out/orders.txt":      "out/orders.txt.errors.jsonl",
	} {
		assert.Equal(t, want, ErrorsPath(in), in)
	}
}

func TestCheckPathRejectsUnknownSchemes(t *testing.T) {
	assert.NoError(t, CheckPath("/tmp/x.jsonl"))
	assert.NoError(t, CheckPath("gs://bucket/x.jsonl"))
	err := CheckPath("s4://bucket/x.jsonl")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no filesystem")
}

type row struct {
	ID string `json:"id"`
	N  int    `json:"n"`
}

func (r *row) Validate() error {
	if r.ID == "" {
		return assert.AnError
	}
	return nil
}

func TestParseFnSendsBadLinesToDeadLetters(t *testing.T) {
	fn := &parseFn{RowType: beam.EncodedType{T: reflect.TypeFor[row]()}}
	for _, tc := range []struct {
		name, line string
		want       any    // the emitted row, if any
		reason     string // the dead letter's reason, if any
	}{
		{"valid", `{"id":"a","n":1}`, row{"a", 1}, ""},
		{"unknown fields are ignored", `{"id":"a","n":1,"x":true}`, row{"a", 1}, ""},
		{"blank line skipped", "   ", nil, ""},
		{"truncated", `{"id":"a"`, nil, "invalid JSON: unexpected EOF"},
		{"two values", `{"id":"a"} {"id":"b"}`, nil, "more than one value"},
		{"wrong type", `{"id":"a","n":"one"}`, nil, "cannot unmarshal string"},
		{"fails Validate", `{"n":1}`, nil, assert.AnError.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rows []any
			var dead []ErrorLine
			fn.ProcessElement(context.Background(), "in.jsonl", tc.line,
				func(r beam.Y) { rows = append(rows, r) }, func(d ErrorLine) { dead = append(dead, d) })
			if tc.want != nil {
				assert.Equal(t, []any{tc.want}, rows)
			} else {
				assert.Empty(t, rows)
			}
			if tc.reason == "" {
				assert.Empty(t, dead)
				return
			}
			require.Len(t, dead, 1)
			assert.Contains(t, dead[0].Reason, tc.reason)
			assert.Equal(t, ErrorLine{Line: tc.line, Source: "in.jsonl", Reason: dead[0].Reason, Stage: StageParse}, dead[0])
		})
	}
}

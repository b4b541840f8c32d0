package jsonl

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/internal/jobrun"
	"github.com/beamdedup/beamdedup/testing/prismtest"
)

func TestMain(m *testing.M) { prismtest.Main(m) }

func init() { beam.RegisterType(reflect.TypeFor[row]()) }

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
	fn.Setup()
	require.True(t, fn.fast, "row decodes with json.Unmarshal first")
	for _, tc := range []struct {
		name, line string
		want       any    // the emitted row, if any
		reason     string // the dead letter's reason, if any
	}{
		{"valid", `{"id":"a","n":1}`, row{"a", 1}, ""},
		{"unknown fields are ignored", `{"id":"a","n":1,"x":true}`, row{"a", 1}, ""},
		{"blank line skipped", "   ", nil, ""},
		{"truncated", `{"id":"a"`, nil, "invalid JSON: unexpected EOF"},
		{"two values", `{"id":"a"} {"id":"b"}`, nil, `data after the value: "{\"id\":\"b\"}"`},
		{"a closing brace too many", `{"id":"a","n":1}}`, nil, `data after the value: "}"`},
		{"trailing text", `{"id":"a"} x`, nil, `data after the value: "x"`},
		{"trailing whitespace", "{\"id\":\"a\",\"n\":1} \r", row{"a", 1}, ""},
		{"a surrogate pair", `{"id":"\ud83d\ude00","n":1}`, row{"\U0001F600", 1}, ""},
		{"an escaped backslash before u", `{"id":"\\ud800","n":1}`, row{`\ud800`, 1}, ""},
		{"a lone high surrogate", `{"id":"u\ud8001","n":1}`, nil, `the escape \ud800 at byte 8 names no Unicode character`},
		{"a lone low surrogate", `{"id":"u\udc00","n":1}`, nil, `the escape \udc00 at byte 8`},
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

// Two ids that differ only in bytes that are not UTF-8 would both decode
// to "u\uFFFD1", one key: each line is dead-lettered instead, with its
// bytes kept.
func TestParseFnDeadLettersALineThatIsNotUTF8KeepingItsBytes(t *testing.T) {
	fn := &parseFn{RowType: beam.EncodedType{T: reflect.TypeFor[row]()}}
	fn.Setup()
	for _, line := range []string{"{\"id\":\"u\xff1\",\"n\":1}", "{\"id\":\"u\xfe1\",\"n\":1}"} {
		var rows []any
		var dead []ErrorLine
		fn.ProcessElement(context.Background(), "in.jsonl", line,
			func(r beam.Y) { rows = append(rows, r) }, func(d ErrorLine) { dead = append(dead, d) })
		assert.Empty(t, rows)
		require.Len(t, dead, 1)
		assert.Equal(t, "not valid UTF-8 (byte 8); the line's bytes are in line_base64", dead[0].Reason)
		b, err := base64.StdEncoding.DecodeString(dead[0].LineBase64)
		require.NoError(t, err)
		assert.Equal(t, line, string(b), "the original bytes")
		assert.Equal(t, "{\"id\":\"u\uFFFD1\",\"n\":1}", dead[0].Line)
		enc, err := json.Marshal(dead[0])
		require.NoError(t, err)
		assert.Contains(t, string(enc), `"line_base64":"`)
	}
}

func TestReadRefusesALocalPathThatMatchesNoFile(t *testing.T) {
	dir := t.TempDir()
	for _, path := range []string{filepath.Join(dir, "missing.jsonl"), filepath.Join(dir, "*.jsonl")} {
		_, s := beam.NewPipelineWithRoot()
		_, _, err := Read(s, path, reflect.TypeFor[row]())
		assert.EqualError(t, err, fmt.Sprintf("no file matches %q", path))
	}
}

// Every line of every file is counted once as a row, a blank line or a
// malformed line, per file.
func TestReadCountsEveryLineOfEachFile(t *testing.T) {
	dir := t.TempDir()
	a := "{\"id\":\"a\",\"n\":1}\n\n   \n{\"id\":\"b\"}}\n{\"id\":\"u\xff\"}\n{\"id\":\"c\",\"n\":3}" // no final newline
	b := "{\"id\":\"d\",\"n\":4}\r\n\r\n{\"n\":5}\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.jsonl"), []byte(a), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "b.jsonl"), []byte(b), 0o644))

	p, s := beam.NewPipelineWithRoot()
	rows, dead, err := Read(s, filepath.Join(dir, "*.jsonl"), reflect.TypeFor[row]())
	require.NoError(t, err)
	passert.Count(s, rows, "rows", 3)
	passert.Count(s, dead, "dead letters", 3)
	pr := prismtest.Run(t, p, time.Minute)

	assert.Equal(t, []Input{
		{Path: filepath.Join(dir, "a.jsonl"), Lines: 6, Rows: 2, Blank: 2, Malformed: 2},
		{Path: filepath.Join(dir, "b.jsonl"), Lines: 3, Rows: 1, Blank: 1, Malformed: 1},
	}, ReadInputs(pr))
	for _, in := range ReadInputs(pr) {
		assert.True(t, in.Accounted(), "%+v", in)
	}
	assert.Equal(t, int64(3), ReadMalformed(pr))
	assert.Equal(t, int64(2), ReadInputFiles(pr))
}

// A remote path is matched when the job runs: one that matches nothing
// fails the job (textio alone would read nothing and succeed).
func TestReadFailsTheJobWhenThePathMatchesNoFileAtRunTime(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	s = s.Scope("Test")
	// checkMatches passes a path it cannot list; this one is local but
	// gone by the time the job runs.
	dir := t.TempDir()
	path := filepath.Join(dir, "x.jsonl")
	require.NoError(t, os.WriteFile(path, []byte("{}\n"), 0o644))
	_, _, err := Read(s, path, reflect.TypeFor[row]())
	require.NoError(t, err)
	require.NoError(t, os.Remove(path))
	_, err = jobrun.Run(context.Background(), p, prismtest.Options(t, time.Minute))
	assert.ErrorContains(t, err, "no files matching pattern")
}

// A chunk of lines is the rows' lines joined by newlines: textio, writing
// a newline after each element, writes the same bytes as for one line an
// element.
func TestFormatFnChunksAreTheRowsLinesJoined(t *testing.T) {
	rows := make([]row, 3000)
	var want []string
	for i := range rows {
		rows[i] = row{ID: fmt.Sprintf("id-<%d>&", i), N: i}
		b, err := json.Marshal(rows[i])
		require.NoError(t, err)
		want = append(want, strings.NewReplacer(`\u003c`, "<", `\u003e`, ">", `\u0026`, "&").Replace(string(b)))
	}
	for _, chunk := range []bool{false, true} {
		fn := &formatFn{Chunk: chunk}
		fn.Setup()
		var got []string
		emit := func(s string) { got = append(got, s) }
		fn.StartBundle(emit)
		for _, r := range rows {
			require.NoError(t, fn.ProcessElement(r, emit))
		}
		fn.FinishBundle(emit)
		assert.Equal(t, strings.Join(want, "\n"), strings.Join(got, "\n"), "chunk=%v", chunk)
		if chunk {
			assert.Less(t, len(got), 10, "chunks of up to %d bytes", chunkBytes)
			assert.Greater(t, len(got), 1)
		} else {
			assert.Len(t, got, len(rows), "a line an element")
		}
	}
}

// Write writes every row once as a line, whether its rows are in the
// global window (in chunks) or in others (a line an element).
func TestWriteWritesEveryRowOnce(t *testing.T) {
	for _, windowed := range []bool{false, true} {
		t.Run(fmt.Sprintf("windowed=%v", windowed), func(t *testing.T) {
			var rows []any
			want := map[string]bool{}
			for i := range 5000 {
				rows = append(rows, row{ID: fmt.Sprintf("r%d", i), N: i})
				want[fmt.Sprintf(`{"id":"r%d","n":%d}`, i, i)] = true
			}
			p, s := beam.NewPipelineWithRoot()
			col := beam.Create(s, rows...)
			if windowed {
				col = beam.WindowInto(s, window.NewFixedWindows(time.Minute), col)
			}
			out := filepath.Join(t.TempDir(), "out.jsonl")
			Write(s, out, col)
			prismtest.Run(t, p, time.Minute)
			b, err := os.ReadFile(out)
			require.NoError(t, err)
			lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
			assert.Len(t, lines, len(rows))
			got := map[string]bool{}
			for _, l := range lines {
				got[l] = true
			}
			assert.Equal(t, want, got)
		})
	}
}

// The types json.Unmarshal decodes first: those it decodes as a Decoder
// with UseNumber does.
func TestPlainTypesAreThoseWithoutInterfacesMapsOrDecoders(t *testing.T) {
	type inner struct{ A []int }
	type node struct{ Next *node }
	for _, tc := range []struct {
		name  string
		t     reflect.Type
		plain bool
	}{
		{"an orders row", reflect.TypeFor[orderRow](), true},
		{"nested structs, slices, pointers", reflect.TypeFor[struct {
			I inner
			P *float32
			S [2]string
		}](), true},
		{"a recursive type", reflect.TypeFor[node](), true},
		{"an interface field", reflect.TypeFor[struct{ V any }](), false},
		{"a map", reflect.TypeFor[struct{ M map[string]int }](), false},
		{"a string option", reflect.TypeFor[struct {
			N int `json:"n,string"`
		}](), false},
		{"a json.Number", reflect.TypeFor[struct{ N json.Number }](), true},
		{"a decoder of its own", reflect.TypeFor[struct{ R json.RawMessage }](), false},
		{"an embedded struct", reflect.TypeFor[struct{ inner }](), false},
	} {
		assert.Equal(t, tc.plain, plain(tc.t, nil), tc.name)
	}
}

// json.Unmarshal and a Decoder with UseNumber (and our check of what
// follows the value) accept the same lines and decode them into the same
// rows of plain types.
func FuzzFastParseAgreesWithEncodingJSON(f *testing.F) {
	for _, l := range append(orderLines(3),
		`{"order_id":"a","quantity":1e3}`, `{"order_id":"a","quantity":1.0}`, `{"quantity":9223372036854775808}`,
		`{"ORDER_ID":"a"}`, `{"order_id":"a","order_id":"b"}`, `{"order_id":null,"price":null}`,
		`{"created_at":"2026-01-01"}`, `{"price":-0}`, ` {"order_id":"x"} `, `{"order_id":"x"}{}`, `[1]`, `"s"`, `null`,
		`{"order_id":"\u00e9\t"}`, `{"order_id":"a",}`, `{"quantity":01}`, `{"id":"a","n":1.5}`, `{"n":-1}`,
	) {
		f.Add(l)
	}
	types := []reflect.Type{reflect.TypeFor[orderRow](), reflect.TypeFor[row](), reflect.TypeFor[struct {
		U  uint8
		F  float32
		B  bool
		P  *int64
		S  []string
		Ts *time.Time
	}]()}
	f.Fuzz(func(t *testing.T, line string) {
		for _, rt := range types {
			var buf []byte
			fastRow, fastDead := parse(rt, &buf, line)
			slowRow, slowDead := parse(rt, nil, line)
			assert.Equal(t, slowDead, fastDead, "%v: %q", rt, line)
			assert.Equal(t, slowRow, fastRow, "%v: %q", rt, line)
		}
	})
}

// ReadInputFiles returns the number of files the job's input paths
// matched.
func ReadInputFiles(pr beam.PipelineResult) int64 {
	if pr == nil {
		return 0
	}
	var n int64
	for _, r := range pr.Metrics().AllMetrics().Counters() {
		if r.Namespace() == Namespace && r.Name() == InputFiles {
			n += r.Result()
		}
	}
	return n
}

// Package jsonl is the JSON Lines input/output and dead-letter format
// shared by the sample pipelines (orders, userevents, cdc) and cmd/runjob:
// it reads and writes JSON Lines files with Beam's textio, turns malformed
// lines and the transforms' dead letters (deadletter.DeadLetter) into lines
// of one errors file (ErrorLine), names that file (ErrorsPath) and reads the
// malformed-line counter from a job's result (ReadMalformed).
//
// Every input line is a row, a blank line, or a malformed line, counted
// per file (ReadInputs). A malformed line becomes an ErrorLine with the
// line, its source file and the reason: so is a line that is not valid
// UTF-8, or whose JSON escapes name a lone UTF-16 surrogate (decoding
// would make the bad bytes U+FFFD and so merge distinct keys; its dead
// letter keeps its bytes, ErrorLine.LineBase64), or has anything after its
// JSON value. An input path that matches no file is an error: at
// construction for a local path, when the job runs for any other.
package jsonl

import (
	"bufio"
	"bytes"
	"context"
	"encoding"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/fileio"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/gcs"   // gs:// paths
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/local" // local paths
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/textio"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beamdedup/beamdedup/transforms/deadletter"
)

// Namespace is the Beam metrics namespace of the pipelines' own counters.
const Namespace = "beamdedup.pipelines"

// The per-file counters in Namespace, named "<kind>/<path of the file>":
// every line read, and exactly one of rows, blank lines and malformed
// lines for each.
const (
	Lines          = "lines"
	Rows           = "rows"
	BlankLines     = "blank_lines"
	MalformedLines = "malformed_lines"
)

// InputFiles counts the files an input path matched.
const InputFiles = "input_files"

var cInputFiles = beam.NewCounter(Namespace, InputFiles)

// ErrorLine is a line of a pipeline's errors file: an input line that did
// not parse, or a row a transform refused (a deadletter.DeadLetter).
type ErrorLine struct {
	Line   string `json:"line" beam:"line"`     // the input line, or the row as JSON
	Source string `json:"source" beam:"source"` // the input file; empty for rows rejected after parsing
	Reason string `json:"reason" beam:"reason"` // why it was rejected
	Stage  string `json:"stage" beam:"stage"`   // "parse", or the UID of the step that rejected it
	// LineBase64 is the line's bytes in standard base64 when the line is
	// not valid UTF-8; Line then shows it with U+FFFD in place of the bad
	// bytes (JSON cannot hold them).
	LineBase64 string `json:"line_base64,omitempty" beam:"line_base64"`
}

// Validator is implemented by row types that check a parsed row; a non-nil
// error sends the line to the dead letters with the error as the reason.
type Validator interface {
	Validate() error
}

// StageParse is the Stage of lines that could not be parsed.
const StageParse = "parse"

func init() {
	register.DoFn5x0[context.Context, string, string, func(beam.Y), func(ErrorLine)](&parseFn{})
	register.Function2x0(countFile)
	register.DoFn2x1[beam.X, func(string), error](&formatFn{})
	register.Emitter1[string]()
	register.Function1x1(fromDeadLetter)
	register.Emitter1[beam.Y]()
	register.Emitter1[ErrorLine]()
	beam.RegisterType(reflect.TypeFor[ErrorLine]())
}

// Read reads the JSON Lines files matching glob (a local path or any
// filesystem Beam has registered, such as gs://) into rows of rowType, a
// struct type registered with Beam. It returns the rows and the dead
// letters of the lines that did not parse, and counts every line per file
// (ReadInputs). A path of an unregistered filesystem, or a local one that
// matches no file, is an error; a remote one that matches no file fails
// the job.
func Read(s beam.Scope, glob string, rowType reflect.Type) (rows, dead beam.PCollection, err error) {
	if err := CheckPath(glob); err != nil {
		return rows, dead, err
	}
	if err := checkMatches(glob); err != nil {
		return rows, dead, err
	}
	s = s.Scope("ReadJSONL")
	// textio matches with empty matches allowed: a path that matches
	// nothing would read nothing and succeed. This match fails the job.
	beam.ParDo0(s.Scope("MatchSome"), countFile, fileio.MatchFiles(s, glob, fileio.MatchEmptyDisallow()))
	lines := textio.ReadWithFilename(s, glob)
	rows, dead = beam.ParDo2(s, &parseFn{RowType: beam.EncodedType{T: rowType}}, lines,
		beam.TypeDefinition{Var: beam.YType, T: rowType})
	return rows, dead, nil
}

// checkMatches refuses a local path that matches no file.
func checkMatches(glob string) error {
	if !isLocal(glob) {
		return nil // listing it needs the filesystem's credentials: the job checks
	}
	matches, err := filepath.Glob(strings.TrimPrefix(glob, "file://"))
	if err != nil {
		return fmt.Errorf("path %q: %w", glob, err)
	}
	if len(matches) == 0 {
		return fmt.Errorf("no file matches %q", glob)
	}
	return nil
}

func isLocal(path string) bool {
	return !strings.Contains(path, "://") || strings.HasPrefix(path, "file://")
}

func countFile(ctx context.Context, _ fileio.FileMetadata) { cInputFiles.Inc(ctx, 1) }

// CheckPath returns an error if no Beam filesystem is registered for path's
// scheme (textio panics on it).
func CheckPath(path string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("path %q: no filesystem for its scheme (local paths and gs:// are supported)", path)
		}
	}()
	filesystem.ValidateScheme(path)
	return nil
}

type parseFn struct {
	RowType beam.EncodedType `json:"row_type"`

	counters map[string]*fileCounters // by file
	fast     bool                     // the row type is plain: json.Unmarshal first
	buf      []byte                   // the line, for json.Unmarshal
}

func (f *parseFn) Setup() { f.fast = plain(f.RowType.T, nil) }

// fileCounters are one file's counters, made once per file so that a
// line costs one map lookup.
type fileCounters struct{ lines, rows, blank, malformed beam.Counter }

func (f *parseFn) countersOf(file string) *fileCounters {
	c := f.counters[file]
	if c == nil {
		if f.counters == nil {
			f.counters = map[string]*fileCounters{}
		}
		counter := func(kind string) beam.Counter { return beam.NewCounter(Namespace, kind+"/"+file) }
		c = &fileCounters{counter(Lines), counter(Rows), counter(BlankLines), counter(MalformedLines)}
		f.counters[file] = c
	}
	return c
}

func (f *parseFn) ProcessElement(ctx context.Context, file, line string, emit func(beam.Y), dead func(ErrorLine)) {
	c := f.countersOf(file)
	c.lines.Inc(ctx, 1)
	if strings.TrimSpace(line) == "" {
		c.blank.Inc(ctx, 1)
		return
	}
	var buf *[]byte
	if f.fast {
		buf = &f.buf
	}
	row, e := parse(f.RowType.T, buf, line)
	if e.Reason != "" {
		c.malformed.Inc(ctx, 1)
		e.Source, e.Stage = file, StageParse
		dead(e)
		return
	}
	c.rows.Inc(ctx, 1)
	emit(row)
}

// ParseRow decodes data, one JSON value, into a row of type t (a value of
// t, checked by its Validate when it has one) as Read decodes a line of a
// file, or says why it cannot: the files' rule, for a source of records
// other than files (a Kafka topic).
func ParseRow(t reflect.Type, data string) (row any, reason string) {
	row, el := parse(t, nil, data)
	return row, el.Reason
}

// parse decodes line into a row of type t, or returns its dead letter's
// line and reason. With buf (t is plain) it decodes with json.Unmarshal
// from buf, which costs fewer allocations than a Decoder and decides the
// same (FuzzFastParseAgreesWithEncodingJSON); a line it refuses goes
// through the Decoder, whose error is the reason.
func parse(t reflect.Type, buf *[]byte, line string) (any, ErrorLine) {
	if !utf8.ValidString(line) {
		at := 0
		for at < len(line) {
			r, n := utf8.DecodeRuneInString(line[at:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			at += n
		}
		return nil, ErrorLine{Line: strings.ToValidUTF8(line, "\uFFFD"), LineBase64: base64.StdEncoding.EncodeToString([]byte(line)),
			Reason: fmt.Sprintf("not valid UTF-8 (byte %d); the line's bytes are in line_base64", at)}
	}
	if at, ok := loneSurrogate(line); ok {
		return nil, ErrorLine{Line: line, Reason: fmt.Sprintf("the escape %s at byte %d names no Unicode character (a lone UTF-16 surrogate)", line[at:at+6], at)}
	}
	p := reflect.New(t)
	if buf != nil {
		*buf = append((*buf)[:0], line...)
		if json.Unmarshal(*buf, p.Interface()) == nil {
			return validated(p, line)
		}
		p = reflect.New(t)
	}
	dec := json.NewDecoder(strings.NewReader(line))
	dec.UseNumber()
	if err := dec.Decode(p.Interface()); err != nil {
		return nil, ErrorLine{Line: line, Reason: "invalid JSON: " + err.Error()}
	}
	if rest := strings.TrimSpace(line[dec.InputOffset():]); rest != "" {
		return nil, ErrorLine{Line: line, Reason: "invalid JSON: data after the value: " + quoteShort(rest)}
	}
	return validated(p, line)
}

// validated is the decoded row *p, or the dead letter of its line when
// the row's Validate refuses it.
func validated(p reflect.Value, line string) (any, ErrorLine) {
	if v, ok := p.Interface().(Validator); ok {
		if err := v.Validate(); err != nil {
			return nil, ErrorLine{Line: line, Reason: err.Error()}
		}
	}
	return p.Elem().Interface(), ErrorLine{}
}

var timeType = reflect.TypeFor[time.Time]()

// plain reports whether rows of type t decode the same with json.Unmarshal
// as with a Decoder with UseNumber: structs, pointers, slices and
// arrays of booleans, numbers, strings and time.Time, with no interface
// (where UseNumber picks a number's type), no map, no method of its own
// that decodes it and no field tagged ",string". seen guards recursion.
func plain(t reflect.Type, seen map[reflect.Type]bool) bool {
	if t == timeType {
		return true
	}
	if seen[t] {
		return true
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) || reflect.PointerTo(t).Implements(textUnmarshalerType) {
		return false
	}
	switch t.Kind() {
	case reflect.Bool, reflect.String, reflect.Float32, reflect.Float64,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return plain(t.Elem(), seen)
	case reflect.Struct:
		if seen == nil {
			seen = map[reflect.Type]bool{}
		}
		seen[t] = true
		for i := range t.NumField() {
			f := t.Field(i)
			if strings.Contains(f.Tag.Get("json"), ",string") || f.Anonymous || !plain(f.Type, seen) {
				return false
			}
		}
		return true
	}
	return false
}

var (
	unmarshalerType     = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// loneSurrogate returns the offset of the first \uXXXX escape of line that
// is a UTF-16 surrogate without its pair: Go's JSON decoder turns it into
// U+FFFD, so two keys that differ only there would become one.
func loneSurrogate(line string) (int, bool) {
	escape := func(i int) (uint64, bool) {
		if i+6 > len(line) || line[i] != '\\' || line[i+1] != 'u' {
			return 0, false
		}
		v, err := strconv.ParseUint(line[i+2:i+6], 16, 16)
		return v, err == nil
	}
	for i := 0; i < len(line); i++ {
		if line[i] != '\\' {
			continue
		}
		v, ok := escape(i)
		if !ok {
			i++ // an escaped character: \\, \", \n ...
			continue
		}
		switch {
		case v >= 0xd800 && v <= 0xdbff:
			if w, ok := escape(i + 6); ok && w >= 0xdc00 && w <= 0xdfff {
				i += 11 // a pair: one character
				continue
			}
			return i, true
		case v >= 0xdc00 && v <= 0xdfff:
			return i, true
		}
		i += 5
	}
	return 0, false
}

// quoteShort quotes s, cut to 40 bytes.
func quoteShort(s string) string {
	if len(s) > 40 {
		return strconv.Quote(s[:40]) + "..."
	}
	return strconv.Quote(s)
}

// Write writes rows, a PCollection of a JSON-marshalable type, to path as
// JSON Lines, in one file. The order of the lines is unspecified.
func Write(s beam.Scope, path string, rows beam.PCollection) {
	s = s.Scope("WriteJSONL")
	textio.Write(s, path, beam.ParDo(s, &formatFn{Chunk: inChunks(rows)}, rows))
}

// WriteLines writes lines, a PCollection of strings, to path, a line each,
// in one file, as Write does.
func WriteLines(s beam.Scope, path string, lines beam.PCollection) {
	s = s.Scope("WriteLines")
	textio.Write(s, path, beam.ParDo(s, &formatFn{Chunk: inChunks(lines), Lines: true}, lines))
}

// inChunks reports whether col's lines are written in chunks, up to
// chunkBytes of lines joined by newlines an element: textio writes each
// element as a line, so a chunk writes the same bytes, and the runner
// carries one element a chunk instead of one a row. Only globally windowed
// lines are, since a bundle's last chunk lands in the global window.
func inChunks(col beam.PCollection) bool {
	return col.WindowingStrategy().Fn.Kind == window.GlobalWindows
}

// chunkBytes is the size past which a chunk of lines is emitted.
const chunkBytes = 64 << 10

// chunk holds lines, each ended by a newline, until they are emitted.
type chunk struct {
	On  bool `json:"on"` // false: each line is emitted at once
	buf bytes.Buffer
}

// done emits the lines held once they fill a chunk (at once when not On).
func (c *chunk) done(emit func(string)) {
	if !c.On || c.buf.Len() >= chunkBytes {
		c.flush(emit)
	}
}

// flush emits the lines held without the last newline (textio writes one
// after each element).
func (c *chunk) flush(emit func(string)) {
	if n := c.buf.Len(); n > 0 {
		emit(string(c.buf.Bytes()[:n-1]))
		c.buf.Reset()
	}
}

// formatFn encodes rows as JSON lines into chunks, or with Lines gathers
// strings as they are.
type formatFn struct {
	Chunk bool `json:"chunk"`
	Lines bool `json:"lines"`

	c   chunk
	enc *json.Encoder
}

func (f *formatFn) Setup() {
	f.c.On = f.Chunk
	f.enc = json.NewEncoder(&f.c.buf)
	f.enc.SetEscapeHTML(false) // keep "<" and "&" readable in the output
}

// StartBundle drops what a failed bundle may have left.
func (f *formatFn) StartBundle(_ func(string)) { f.c.buf.Reset() }

func (f *formatFn) ProcessElement(row beam.X, emit func(string)) error {
	if f.Lines {
		f.c.buf.WriteString(row.(string))
		f.c.buf.WriteByte('\n')
	} else if err := f.enc.Encode(row); err != nil { // writes nothing on failure
		return fmt.Errorf("encoding %T as JSON: %w", row, err)
	}
	f.c.done(emit)
	return nil
}

// FinishBundle emits the bundle's last chunk.
func (f *formatFn) FinishBundle(emit func(string)) { f.c.flush(emit) }

// FromDeadLetters turns the transforms' dead letters (a PCollection of
// deadletter.DeadLetter) into ErrorLines, with Stage set to the refusing
// transform's UID, so that one file holds every dead letter of a pipeline.
func FromDeadLetters(s beam.Scope, dead beam.PCollection) beam.PCollection {
	return beam.ParDo(s.Scope("FromDeadLetters"), fromDeadLetter, dead)
}

func fromDeadLetter(d deadletter.DeadLetter) ErrorLine {
	return ErrorLine{Line: d.Row, Reason: d.Reason, Stage: d.Transform}
}

// ErrorsPath is the default dead-letter path for output path: the output
// without a .jsonl/.json extension, plus ".errors.jsonl".
func ErrorsPath(output string) string {
	for _, ext := range []string{".jsonl", ".json"} {
		if strings.HasSuffix(output, ext) {
			return strings.TrimSuffix(output, ext) + ".errors.jsonl"
		}
	}
	return output + ".errors.jsonl"
}

// Input is what a job read from one input file.
type Input struct {
	Path                          string
	Lines, Rows, Blank, Malformed int64
}

// Accounted reports whether every line of the file is a row, a blank line
// or a malformed line.
func (in Input) Accounted() bool { return in.Lines == in.Rows+in.Blank+in.Malformed }

// ReadInputs returns the per-file counts of a job's result, by path; a
// file of which no line was read is not there.
func ReadInputs(pr beam.PipelineResult) []Input {
	if pr == nil {
		return nil
	}
	byPath := map[string]*Input{}
	for _, r := range pr.Metrics().AllMetrics().Counters() {
		if r.Namespace() != Namespace {
			continue
		}
		kind, path, ok := strings.Cut(r.Name(), "/")
		if !ok {
			continue
		}
		in := byPath[path]
		if in == nil {
			in = &Input{Path: path}
			byPath[path] = in
		}
		n := map[string]*int64{Lines: &in.Lines, Rows: &in.Rows, BlankLines: &in.Blank, MalformedLines: &in.Malformed}[kind]
		if n != nil {
			*n += r.Result()
		}
	}
	var ins []Input
	for _, in := range byPath {
		ins = append(ins, *in)
	}
	slices.SortFunc(ins, func(a, b Input) int { return strings.Compare(a.Path, b.Path) })
	return ins
}

// Total sums inputs (its Path is empty).
func Total(inputs []Input) Input {
	var t Input
	for _, in := range inputs {
		t.Lines += in.Lines
		t.Rows += in.Rows
		t.Blank += in.Blank
		t.Malformed += in.Malformed
	}
	return t
}

// ReadMalformed returns the malformed lines of every input file of a
// job's result.
func ReadMalformed(pr beam.PipelineResult) int64 { return Total(ReadInputs(pr)).Malformed }

// WriteFile writes rows to path as JSON Lines, one JSON object a line,
// creating its directory: how the sample generators write their input.
func WriteFile[T any](path string, rows []T) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(f)
	enc := json.NewEncoder(bw)
	for _, r := range rows {
		if err := enc.Encode(r); err != nil {
			f.Close()
			return err
		}
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

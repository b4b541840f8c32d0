// Package jsonl is the JSON Lines input/output and dead-letter format
// shared by the sample pipelines (orders, userevents, cdc) and cmd/runjob:
// it reads and writes JSON Lines files with Beam's textio, turns malformed
// lines and the transforms' dead letters (deadletter.DeadLetter) into lines
// of one errors file (ErrorLine), names that file (ErrorsPath) and reads the
// malformed-line counter from a job's result (ReadMalformed).
//
// A malformed line never stops a job: it becomes an ErrorLine with the line,
// its source file and the reason, and is counted under the counter
// MalformedLines in namespace Namespace.
package jsonl

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/gcs"   // gs:// paths
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/local" // local paths
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/textio"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beamdedup/beamdedup/transforms/deadletter"
)

// Namespace is the Beam metrics namespace of the pipelines' own counters.
const Namespace = "beamdedup.pipelines"

// MalformedLines counts input lines that could not be parsed into a row.
const MalformedLines = "malformed_lines"

var cMalformed = beam.NewCounter(Namespace, MalformedLines)

// ErrorLine is a line of a pipeline's errors file: an input line that did
// not parse, or a row a transform refused (a deadletter.DeadLetter).
type ErrorLine struct {
	Line   string `json:"line" beam:"line"`     // the input line, or the row as JSON
	Source string `json:"source" beam:"source"` // the input file; empty for rows rejected after parsing
	Reason string `json:"reason" beam:"reason"` // why it was rejected
	Stage  string `json:"stage" beam:"stage"`   // "parse", or the UID of the step that rejected it
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
	register.DoFn1x2[beam.X, string, error](&formatFn{})
	register.Function1x1(fromDeadLetter)
	register.Emitter1[beam.Y]()
	register.Emitter1[ErrorLine]()
	beam.RegisterType(reflect.TypeFor[ErrorLine]())
}

// Read reads the JSON Lines files matching glob (a local path or any
// filesystem Beam has registered, such as gs://) into rows of rowType, a
// struct type registered with Beam. It returns the rows and the dead
// letters of the lines that did not parse. Blank lines are skipped. A path
// of an unregistered filesystem is an error.
func Read(s beam.Scope, glob string, rowType reflect.Type) (rows, dead beam.PCollection, err error) {
	if err := CheckPath(glob); err != nil {
		return rows, dead, err
	}
	s = s.Scope("ReadJSONL")
	lines := textio.ReadWithFilename(s, glob)
	rows, dead = beam.ParDo2(s, &parseFn{RowType: beam.EncodedType{T: rowType}}, lines,
		beam.TypeDefinition{Var: beam.YType, T: rowType})
	return rows, dead, nil
}

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
}

func (f *parseFn) ProcessElement(ctx context.Context, file, line string, emit func(beam.Y), dead func(ErrorLine)) {
	if strings.TrimSpace(line) == "" {
		return
	}
	p := reflect.New(f.RowType.T)
	reason := ""
	dec := json.NewDecoder(strings.NewReader(line))
	dec.UseNumber()
	if err := dec.Decode(p.Interface()); err != nil {
		reason = "invalid JSON: " + err.Error()
	} else if dec.More() {
		reason = "invalid JSON: more than one value on the line"
	} else if v, ok := p.Interface().(Validator); ok {
		if err := v.Validate(); err != nil {
			reason = err.Error()
		}
	}
	if reason != "" {
		cMalformed.Inc(ctx, 1)
		dead(ErrorLine{Line: line, Source: file, Reason: reason, Stage: StageParse})
		return
	}
	emit(p.Elem().Interface())
}

// Write writes rows, a PCollection of a JSON-marshalable type, to path as
// JSON Lines, in one file. The order of the lines is unspecified.
func Write(s beam.Scope, path string, rows beam.PCollection) {
	s = s.Scope("WriteJSONL")
	textio.Write(s, path, beam.ParDo(s, &formatFn{}, rows))
}

type formatFn struct{}

func (*formatFn) ProcessElement(row beam.X) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // keep "<" and "&" readable in the output
	if err := enc.Encode(row); err != nil {
		return "", fmt.Errorf("encoding %T as JSON: %w", row, err)
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

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

// ReadMalformed returns the MalformedLines total from a pipeline result.
func ReadMalformed(pr beam.PipelineResult) int64 {
	if pr == nil {
		return 0
	}
	var n int64
	for _, r := range pr.Metrics().AllMetrics().Counters() {
		if r.Namespace() == Namespace && r.Name() == MalformedLines {
			n += r.Result()
		}
	}
	return n
}

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

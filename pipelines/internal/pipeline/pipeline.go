// Package pipeline holds what the sample pipelines share around
// dedup.KeepFirst: the whole read → KeepFirst → write body (Build),
// construction with errors instead of panics, one dead-letter collection,
// and the outputs.
package pipeline

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamdedup/beamdedup/pipelines/jsonl"
	"github.com/beamdedup/beamdedup/transforms/dedup"
)

// Build adds a sample pipeline's body to s, the pipeline's own scope: it
// reads input (a JSON Lines file or glob) into rows of rowType, applies
// prepare to them if it is not nil (say to set timestamps), keeps the first
// row per key with KeepFirst and opts, flattens the malformed lines and the
// rows KeepFirst rejected into one dead-letter collection (jsonl.ErrorLine),
// and writes the output and the dead letters with WriteOutputs.
//
// It returns the prepared rows, KeepFirst's output and the dead letters.
// The errors are "Input is required", "input: ..." for a bad input path,
// KeepFirst's construction error as is, and "output: ..." for a bad output
// path; the caller prefixes its name.
func Build(s beam.Scope, input, output, errorsPath string, rowType reflect.Type,
	prepare func(beam.Scope, beam.PCollection) beam.PCollection, opts []dedup.Option,
) (rows, out, dead beam.PCollection, err error) {
	if input == "" {
		return rows, out, dead, errors.New("Input is required")
	}
	rows, bad, err := jsonl.Read(s, input, rowType)
	if err != nil {
		return rows, out, dead, fmt.Errorf("input: %w", err)
	}
	if prepare != nil {
		rows = prepare(s, rows)
	}
	out, rejected, err := KeepFirst(s, rows, opts)
	if err != nil {
		return rows, out, dead, err
	}
	dead = beam.Flatten(s, bad, rejected)
	if err := WriteOutputs(s, output, errorsPath, out, dead); err != nil {
		return rows, out, dead, fmt.Errorf("output: %w", err)
	}
	return rows, out, dead, nil
}

// KeepFirst applies dedup.KeepFirstWithErrors and returns its output and
// its dead letters as jsonl.ErrorLine. A construction error (say a bad
// column named on the command line) is returned, not panicked.
func KeepFirst(s beam.Scope, rows beam.PCollection, opts []dedup.Option) (out, dead beam.PCollection, err error) {
	defer func() {
		// KeepFirstWithErrors panics with its construction error; the
		// pipeline is discarded by the caller on error, so the partial
		// graph does not matter.
		if r := recover(); r != nil {
			e, ok := r.(error)
			if !ok {
				e = fmt.Errorf("%v", r)
			}
			err = e
		}
	}()
	out, rejected := dedup.KeepFirstWithErrors(s, rows, opts...)
	return out, jsonl.FromDeadLetters(s, rejected), nil
}

// WriteOutputs writes out to output and dead to errorsPath (default
// jsonl.ErrorsPath(output)) as JSON Lines. An empty output writes nothing.
// textio writes no file for an empty collection, so a run without dead
// letters leaves no errors file.
func WriteOutputs(s beam.Scope, output, errorsPath string, out, dead beam.PCollection) error {
	if output == "" {
		return nil
	}
	if errorsPath == "" {
		errorsPath = jsonl.ErrorsPath(output)
	}
	for _, p := range []string{output, errorsPath} {
		if err := jsonl.CheckPath(p); err != nil {
			return err
		}
	}
	jsonl.Write(s.Scope("Output"), output, out)
	jsonl.Write(s.Scope("Errors"), errorsPath, dead)
	return nil
}

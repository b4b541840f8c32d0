// Package pipeline holds the body the sample pipelines share: read a JSON
// Lines file into rows, apply a deduplicating step (any: KeepFirst,
// KeepLast, or a step of the pipeline's own), collect the malformed lines
// and the rows the step rejected into one dead-letter collection, and
// write the output and the dead letters (Build). BuildKeepFirst is that
// body for the samples that keep the first row per key (orders,
// userevents, cdc), configured by one Config.
package pipeline

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamdedup/beamdedup/pipelines/jsonl"
	"github.com/beamdedup/beamdedup/transforms/dedup"
)

// Step is a pipeline's deduplicating step: from the rows, its output and
// its dead letters (deadletter.DeadLetter), or the error that stops the
// construction (a bad column named on the command line, say).
type Step func(s beam.Scope, rows beam.PCollection) (out, dead beam.PCollection, err error)

// KeepFirst is the step dedup.TryKeepFirst with opts.
func KeepFirst(opts ...dedup.Option) Step { return dedupStep(dedup.TryKeepFirst, opts) }

// KeepLast is the step dedup.TryKeepLast with opts.
func KeepLast(opts ...dedup.Option) Step { return dedupStep(dedup.TryKeepLast, opts) }

func dedupStep(try func(beam.Scope, beam.PCollection, ...dedup.Option) (dedup.Result, error), opts []dedup.Option) Step {
	return func(s beam.Scope, rows beam.PCollection) (beam.PCollection, beam.PCollection, error) {
		r, err := try(s, rows, opts...)
		return r.Rows, r.DeadLetters, err
	}
}

// Spec describes a sample pipeline's body.
type Spec struct {
	// Input is a JSON Lines file or glob (local or gs://); required.
	Input string
	// Output is the JSON Lines file of the step's output; empty writes
	// nothing (tests read Result instead).
	Output string
	// Errors is the dead-letter file; empty means jsonl.ErrorsPath(Output).
	Errors string
	// Row is the type the lines are decoded into (a registered struct).
	Row reflect.Type
	// Prepare, when set, is applied to the rows before Step (to set their
	// timestamps, say).
	Prepare func(s beam.Scope, rows beam.PCollection) beam.PCollection
	// Step deduplicates the rows; required.
	Step Step
}

// Result holds the collections of a pipeline built by Build.
type Result struct {
	Rows        beam.PCollection // the rows read (after Prepare)
	Out         beam.PCollection // the step's output
	DeadLetters beam.PCollection // malformed lines and rejected rows (jsonl.ErrorLine)
}

// Config configures a KeepFirst sample's Build (orders, userevents, cdc).
type Config struct {
	// Input is a file or glob of JSON Lines rows (local or gs://).
	Input string
	// Output is the JSON Lines file of the kept rows; empty writes
	// nothing (tests read Result instead).
	Output string
	// Errors is the dead-letter file; empty means jsonl.ErrorsPath(Output)
	// when Output is set.
	Errors string
	// Dedup options are applied after the sample's defaults (its Build
	// names them); a later option of a kind replaces the default.
	Dedup []dedup.Option
}

// BuildKeepFirst adds a KeepFirst sample to s in the scope name: cfg's
// rows of type row, prepared by prepare (optional), kept with
// dedup.TryKeepFirst of defaults then cfg.Dedup. Its errors are Build's,
// prefixed with name in lower case.
func BuildKeepFirst(s beam.Scope, name string, cfg Config, row reflect.Type, prepare func(beam.Scope, beam.PCollection) beam.PCollection, defaults ...dedup.Option) (Result, error) {
	r, err := Build(s.Scope(name), Spec{
		Input: cfg.Input, Output: cfg.Output, Errors: cfg.Errors,
		Row: row, Prepare: prepare, Step: KeepFirst(slices.Concat(defaults, cfg.Dedup)...),
	})
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", strings.ToLower(name), err)
	}
	return r, nil
}

// Build adds the body described by spec to s, the pipeline's own scope.
// The errors are "Input is required", "input: ..." for a bad input path,
// the step's construction error as is, and "output: ..." for a bad output
// path; the caller prefixes its name.
func Build(s beam.Scope, spec Spec) (Result, error) {
	var r Result
	if spec.Input == "" {
		return r, errors.New("Input is required")
	}
	if spec.Step == nil {
		return r, errors.New("pipeline: Spec.Step is required")
	}
	rows, bad, err := jsonl.Read(s, spec.Input, spec.Row)
	if err != nil {
		return r, fmt.Errorf("input: %w", err)
	}
	if spec.Prepare != nil {
		rows = spec.Prepare(s, rows)
	}
	out, rejected, err := spec.Step(s, rows)
	if err != nil {
		return r, err
	}
	r = Result{Rows: rows, Out: out, DeadLetters: beam.Flatten(s, bad, jsonl.FromDeadLetters(s, rejected))}
	if err := WriteOutputs(s, spec.Output, spec.Errors, r.Out, r.DeadLetters); err != nil {
		return r, fmt.Errorf("output: %w", err)
	}
	return r, nil
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

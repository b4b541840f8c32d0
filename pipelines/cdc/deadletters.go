package cdc

import (
	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamdedup/beamdedup/pipelines/internal/jsonl"
)

// DeadLetter is an input line or row the pipeline could not process, as
// written to the dead-letter file: the line, its source file, the reason
// and the stage that rejected it.
type DeadLetter = jsonl.DeadLetter

// ErrorsPath is the default dead-letter file for an output file: the
// output without its .jsonl extension, plus ".errors.jsonl".
func ErrorsPath(output string) string { return jsonl.ErrorsPath(output) }

// ReadMalformed returns the number of input lines that did not parse, from
// a pipeline result.
func ReadMalformed(pr beam.PipelineResult) int64 { return jsonl.ReadMalformed(pr) }

// Package pipeline holds the steps the sample pipelines share around
// dedup.KeepFirst: construction with errors instead of panics, one
// dead-letter collection, and the outputs.
package pipeline

import (
	"fmt"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamdedup/beamdedup/pipelines/internal/jsonl"
	"github.com/beamdedup/beamdedup/transforms/dedup"
)

// KeepFirst applies dedup.KeepFirstWithErrors and returns its output and
// its dead letters as jsonl.DeadLetter. A construction error (say a bad
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
	return out, jsonl.FromDedup(s, rejected), nil
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

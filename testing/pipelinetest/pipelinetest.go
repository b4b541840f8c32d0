// Package pipelinetest runs the sample pipelines on their testdata
// (testing/prismtest runs them) and compares JSON Lines files with
// expected files.
package pipelinetest

import (
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/pipelines/jsonl"
	"github.com/beamdedup/beamdedup/testing/prismtest"
	"github.com/beamdedup/beamdedup/transforms/dedup"
)

// Expansions are KeepFirst's two expansions of a bounded input, for
// table-driven tests: the batch one a file gets by default, and the
// stateful one (dedup.AsStream) that an unbounded source gets.
var Expansions = []struct {
	Name    string
	Options []dedup.Option
}{
	{"batch", nil},
	{"stateful", []dedup.Option{dedup.AsStream()}},
}

// Update makes CompareLines rewrite the expected files:
// go test ./pipelines/... -update.
var Update = flag.Bool("update", false, "rewrite expected files under testing/testdata")

// Testdata returns the path of name under the repository's testing/testdata.
func Testdata(name string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata", name)
}

// ReadLines returns the non-empty lines of path, sorted (textio writes in
// no particular order); a missing file has no lines.
func ReadLines(t testing.TB, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var lines []string
	for l := range strings.SplitSeq(string(b), "\n") {
		if l != "" {
			lines = append(lines, l)
		}
	}
	slices.Sort(lines)
	return lines
}

// CompareLines checks that the lines of got equal those of the expected
// file, ignoring order; with -update it rewrites the expected file.
// oldnew are replacement pairs (strings.NewReplacer) applied to got's lines
// first, to remove machine-specific parts such as temporary paths.
func CompareLines(t testing.TB, expectedPath, got string, oldnew ...string) {
	t.Helper()
	lines := ReadLines(t, got)
	if len(oldnew) > 0 {
		r := strings.NewReplacer(oldnew...)
		for i, l := range lines {
			lines[i] = r.Replace(l)
		}
		slices.Sort(lines)
	}
	if *Update {
		data := strings.Join(lines, "\n")
		if data != "" {
			data += "\n"
		}
		require.NoError(t, os.WriteFile(expectedPath, []byte(data), 0o644))
	}
	assert.Equal(t, ReadLines(t, expectedPath), lines, "%s vs %s (run with -update to accept)", got, expectedPath)
}

// RunTestdata builds a sample pipeline with build on the input file
// testing/testdata/<dir>/input.jsonl and an output file in a temporary
// directory, runs it with a one-minute deadline, and compares the output
// with <dir>/expected.jsonl and its dead letters (jsonl.ErrorsPath of the
// output, with the input's directory removed from their sources) with
// <dir>/expected.errors.jsonl. It returns the result, for the caller's
// counter checks.
func RunTestdata(t testing.TB, dir string, build func(s beam.Scope, input, output string) error) beam.PipelineResult {
	t.Helper()
	out := filepath.Join(t.TempDir(), dir+".jsonl")
	input := Testdata(dir + "/input.jsonl")
	p, s := beam.NewPipelineWithRoot()
	require.NoError(t, build(s, input, out))

	pr := prismtest.Run(t, p, time.Minute)

	// Every line of the input is a row, a blank line or a malformed line,
	// and the job read as many as the file has.
	b, err := os.ReadFile(input)
	require.NoError(t, err)
	lines := int64(strings.Count(string(b), "\n"))
	if len(b) > 0 && b[len(b)-1] != '\n' {
		lines++
	}
	ins := jsonl.ReadInputs(pr)
	require.Len(t, ins, 1, "one input file")
	assert.Equal(t, lines, ins[0].Lines, "lines read of %s", input)
	assert.True(t, ins[0].Accounted(), "every line a row, blank or malformed: %+v", ins[0])

	CompareLines(t, Testdata(dir+"/expected.jsonl"), out)
	CompareLines(t, Testdata(dir+"/expected.errors.jsonl"),
		jsonl.ErrorsPath(out), filepath.Dir(input)+string(filepath.Separator), "")
	return pr
}

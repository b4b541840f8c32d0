package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamdedup/beamdedup/pipelines/jsonl"
	"github.com/beamdedup/beamdedup/pipelines/orders"
	"github.com/beamdedup/beamdedup/transforms/dedup"
)

// prepareFiles fills in the default output and, for local outputs,
// removes the files of an earlier run (textio writes no file for an empty
// collection, so a stale errors file would otherwise survive); without
// --input, input writes or finds the pipeline's default input.
func prepareFiles(o *options, input func(o *options) error) error {
	if o.output == "" {
		o.output = filepath.Join(os.TempDir(), "beamdedup", o.pipeline, "output.jsonl")
	}
	if o.errors == "" {
		o.errors = jsonl.ErrorsPath(o.output)
	}
	for _, p := range []string{o.output, o.errors} {
		if isLocal(p) {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
				return err
			}
		}
	}
	if o.input == "" {
		if err := input(o); err != nil {
			return err
		}
	}
	// The workers may run in another directory (a worker pool, Flink's
	// task managers): a relative path would name another file there, or
	// none.
	// An input that matches nothing stays as given, for the error that
	// names it.
	if matches, _ := filepath.Glob(o.input); len(matches) == 0 {
		return absolute(&o.output, &o.errors)
	}
	return absolute(&o.input, &o.output, &o.errors)
}

// absolute makes each local path absolute.
func absolute(paths ...*string) error {
	for _, p := range paths {
		if isLocal(*p) {
			abs, err := filepath.Abs(*p)
			if err != nil {
				return err
			}
			*p = abs
		}
	}
	return nil
}

// generatedInput is where a pipeline's generated input goes: next to a
// local output, where remote workers could not read it, so a remote
// output needs --input.
func generatedInput(o *options, what string) (string, error) {
	if !isLocal(o.output) {
		return "", fmt.Errorf("--output=%s is not local: give --input too (a file the workers can read); %s are written next to the output", o.output, what)
	}
	return filepath.Join(filepath.Dir(o.output), "input.jsonl"), nil
}

// generatedOrders writes --count generated orders.
func generatedOrders(o *options) error {
	path, err := generatedInput(o, "generated orders")
	if err != nil {
		return err
	}
	o.input = path
	if err := orders.WriteSample(o.input, o.count, o.seed); err != nil {
		return fmt.Errorf("writing generated orders: %w", err)
	}
	o.distinctRows = o.count
	o.inputNote = fmt.Sprintf("generated: %d orders, seed %d, every order priced under %v duplicated", o.count, o.seed, orders.DuplicateBelow)
	return nil
}

// repositorySample is testing/testdata/<pipeline>/input.jsonl.
func repositorySample(o *options) error {
	o.input = filepath.Join("testing", "testdata", o.pipeline, "input.jsonl")
	if _, err := os.Stat(o.input); err != nil {
		return fmt.Errorf("no --input given, and the sample %s is not here: run from the repository's root, or give --input", o.input)
	}
	o.inputNote = "the repository's sample"
	return nil
}

func isLocal(path string) bool { return !strings.Contains(path, "://") }

// summarize prints a file pipeline's summary: what came in, file by file
// and line by line, where every line went (the counters must account for
// each: exit 1 otherwise), and where the output went; note says what the
// output file shows.
func summarize(w, stderr io.Writer, o *options, pr beam.PipelineResult, wall time.Duration, note func(*options) string) int {
	fmt.Fprintf(w, "pipeline            %s on %s\n", o.pipeline, runnerNote(o.runner))
	fmt.Fprintf(w, "input               %s", o.input)
	if o.inputNote != "" {
		fmt.Fprintf(w, " (%s)", o.inputNote)
	}
	fmt.Fprintln(w)
	if pr == nil {
		// Dry runs, the dot runner and async submissions return no result.
		fmt.Fprintf(w, "metrics             none: the runner returned no job result (dry run, dot or --async)\n")
		fmt.Fprintf(w, "wall time           %v\n", wall.Round(time.Millisecond))
		return 0
	}
	c := dedup.ReadCounters(pr)
	inputs := jsonl.ReadInputs(pr)
	in := jsonl.Total(inputs)
	if len(inputs) != 1 || inputs[0].Path != o.input {
		for _, f := range inputs {
			fmt.Fprintf(w, "  %-17s %s\n", f.Path, lineCounts(f))
		}
	}
	fmt.Fprintf(w, "lines               %s\n", lineCounts(in))
	fmt.Fprintf(w, "rows in             %d\n", c.RowsIn)
	fmt.Fprintf(w, "emitted             %d", c.Emitted)
	if o.distinctRows > 0 {
		fmt.Fprintf(w, " (distinct order_ids in the input: %d)", o.distinctRows)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "duplicates dropped  %d\n", c.DuplicatesDropped)
	if n := c.LateDropped; n > 0 {
		fmt.Fprintf(w, "late dropped        %d\n", n)
	}
	if n := c.CandidatesReplaced; n > 0 {
		fmt.Fprintf(w, "replaced            %d (by an earlier row of their key)\n", n)
	}
	if n := c.ChangelogSwallowed + c.RetractionsIgnored; n > 0 {
		fmt.Fprintf(w, "changes swallowed   %d\n", n)
	}
	dead := in.Malformed + c.DeadLettered
	fmt.Fprintf(w, "dead-lettered       %d (%d malformed lines, %d rejected rows)\n", dead, in.Malformed, c.DeadLettered)
	sum, ok := accounting(in, c)
	fmt.Fprintf(w, "every line          %s\n", sum)
	fmt.Fprintf(w, "wall time           %v\n", wall.Round(time.Millisecond))
	out := ""
	if note != nil {
		out = note(o)
	}
	fmt.Fprintf(w, "output              %s%s\n", o.output, out)
	errs := o.errors
	if dead == 0 {
		errs += " (none written: no dead letters)"
	}
	fmt.Fprintf(w, "dead letters        %s\n", errs)
	if !ok {
		fmt.Fprintf(stderr, "runjob: the job's counters do not account for every input line (%s); this is a bug of beamdedup: please report it with the command line\n", sum)
		return 1
	}
	return 0
}

// lineCounts is "N lines: R rows, B blank, M malformed".
func lineCounts(in jsonl.Input) string {
	return fmt.Sprintf("%d: %d rows, %d blank, %d malformed", in.Lines, in.Rows, in.Blank, in.Malformed)
}

// accounting says where every input line went, and whether the counters
// add up: each file's lines are rows, blank or malformed lines; the rows
// are the dedup step's input; and each of those was emitted, dropped as a
// duplicate (or late, or replaced, or a swallowed change) or
// dead-lettered.
func accounting(in jsonl.Input, c dedup.Counters) (string, bool) {
	// always: shown even when zero; the others only when they happened.
	terms := []struct {
		n      int64
		what   string
		always bool
	}{
		{c.Emitted, "emitted", true}, {c.DuplicatesDropped, "duplicates dropped", true}, {c.LateDropped, "late", false},
		{c.CandidatesReplaced, "replaced", false}, {c.ChangelogSwallowed + c.RetractionsIgnored, "changes swallowed", false},
		{in.Malformed + c.DeadLettered, "dead-lettered", true}, {in.Blank, "blank", true},
	}
	var b strings.Builder
	var sum int64
	fmt.Fprintf(&b, "%d =", in.Lines)
	first := true
	for _, t := range terms {
		sum += t.n
		if t.n == 0 && !t.always {
			continue
		}
		if !first {
			b.WriteString(" +")
		}
		first = false
		fmt.Fprintf(&b, " %d %s", t.n, t.what)
	}
	ok := in.Accounted() && in.Rows == c.RowsIn && c.Pending() == 0 && sum == in.Lines
	if !ok {
		fmt.Fprintf(&b, ", which does not add up (rows %d, rows into the dedup step %d, still pending %d)", in.Rows, c.RowsIn, c.Pending())
	}
	return b.String(), ok
}

// ordersNote counts the rows of a local orders output and their distinct
// order_ids, the check that deduplication did its job.
func ordersNote(o *options) string {
	if !isLocal(o.output) {
		return ""
	}
	b, err := os.ReadFile(o.output)
	if err != nil {
		return ""
	}
	rows := 0
	ids := map[string]bool{}
	for line := range strings.SplitSeq(string(b), "\n") {
		if line == "" {
			continue
		}
		rows++
		var r struct {
			OrderID string `json:"order_id"`
		}
		if json.Unmarshal([]byte(line), &r) == nil {
			ids[r.OrderID] = true
		}
	}
	return fmt.Sprintf(" (%d rows, %d distinct order_ids)", rows, len(ids))
}

package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamdedup/beamdedup/internal/jobrun"
	"github.com/beamdedup/beamdedup/pipelines/cdc"
	"github.com/beamdedup/beamdedup/pipelines/orders"
	"github.com/beamdedup/beamdedup/pipelines/userevents"
)

// report prints a finished run's summary and returns the exit code.
type report func(stdout, stderr io.Writer, wall time.Duration) int

// pipelineRun is how run handles one pipeline (mode): everything that
// differs between them is here, in its entry of pipelineTable.
type pipelineRun struct {
	// name is the --pipeline value; mode is the pipeline as appliesTo
	// names it (the name, but for the two modes of streaming).
	name, mode string
	// files: it reads and writes JSON Lines files (--input, --output,
	// --errors, and the KeepFirst flags of a file).
	files bool
	// generated: its default input is generated (--count, --seed).
	generated bool
	// check rejects options of this pipeline that are wrong whatever the
	// runner (optional).
	check func(o *options) error
	// prepare fills in defaults and writes generated input (optional).
	prepare func(o *options) error
	// build adds the pipeline to s. run calls it on a scratch pipeline
	// before anything runs, so that a construction error is reported as
	// the command line's; nil when there is nothing of the user's to
	// check.
	build func(s beam.Scope, o *options) error
	// run runs the pipeline as job; its error is the job's.
	run func(ctx context.Context, o *options, job jobrun.Options, stderr io.Writer) (report, error)
	// describe names the run in a failure ("orders pipeline on prism").
	describe func(o *options) string
	// checkRunner rejects runners the pipeline cannot run on (optional).
	checkRunner func(o *options) error
	// untilStopped: the run goes on until stopped, and --timeout, when
	// given, is its stop.
	untilStopped bool
}

// pipelineTable holds every pipeline (mode) runjob runs, in --help's
// order.
var pipelineTable = []pipelineRun{
	filePipeline(fileSpec{name: "orders", build: keepFirst(orders.Build), input: generatedOrders, generated: true, note: ordersNote}),
	filePipeline(fileSpec{name: "userevents", build: keepFirst(userevents.Build), input: repositorySample}),
	filePipeline(fileSpec{name: "cdc", build: keepFirst(cdc.Build), input: repositorySample}),
	withMode(demoRun, "streaming", streamingDemo, func(p *pipelineRun) { p.generated = true }),
	withMode(liveRun, "streaming", streamingLive, func(p *pipelineRun) { p.check = checkStreaming }),
	withMode(orderStatusRun, "orderstatus", "orderstatus", func(p *pipelineRun) { p.files, p.generated = true, true }),
	withMode(kafkaRun, "kafka", "kafka", func(p *pipelineRun) { p.generated = true }),
}

// withMode is the entry of a pipeline defined with its own file.
func withMode(p pipelineRun, name, mode string, set func(*pipelineRun)) pipelineRun {
	p.name, p.mode = name, mode
	set(&p)
	return p
}

// pipelineNames are the --pipeline values, in the table's order.
var pipelineNames = func() []string {
	var names []string
	for _, p := range pipelineTable {
		if !slices.Contains(names, p.name) {
			names = append(names, p.name)
		}
	}
	return names
}()

// modesWhere lists the modes of the entries for which f holds.
func modesWhere(f func(pipelineRun) bool) []string {
	var modes []string
	for _, p := range pipelineTable {
		if f(p) {
			modes = append(modes, p.mode)
		}
	}
	return modes
}

// pipelineOf returns the entry of o's pipeline (mode), and whether there
// is one.
func pipelineOf(o *options) (pipelineRun, bool) {
	m := mode(o)
	i := slices.IndexFunc(pipelineTable, func(p pipelineRun) bool { return p.mode == m })
	if i < 0 {
		return pipelineRun{}, false
	}
	pl := pipelineTable[i]
	if pl.checkRunner == nil {
		pl.checkRunner = func(*options) error { return nil }
	}
	return pl, true
}

func pipelineOn(o *options) string { return fmt.Sprintf("%s pipeline on %s", o.pipeline, o.runner) }

// fileSpec describes a pipeline that reads a JSON Lines file and writes
// one.
type fileSpec struct {
	name  string
	build func(s beam.Scope, o *options) error
	// input writes or finds the default input, without --input.
	input func(o *options) error
	// generated: input generates it (--count, --seed apply).
	generated bool
	// note says what the output file shows (optional).
	note func(o *options) string
}

// filePipeline prepares the files, builds the pipeline, runs it as a job
// and summarizes its metrics and output.
func filePipeline(f fileSpec) pipelineRun {
	return pipelineRun{
		name: f.name, mode: f.name, files: true, generated: f.generated,
		prepare:  func(o *options) error { return prepareFiles(o, f.input) },
		build:    f.build,
		describe: pipelineOn,
		run: jobOf(f.build, func(stdout, stderr io.Writer, o *options, pr beam.PipelineResult, wall time.Duration) int {
			return summarize(stdout, stderr, o, pr, wall, f.note)
		}),
	}
}

// jobOf is the run of a pipeline that build makes: it runs as one job,
// and summary reports on its result.
func jobOf(build func(beam.Scope, *options) error, summary func(stdout, stderr io.Writer, o *options, pr beam.PipelineResult, wall time.Duration) int) func(context.Context, *options, jobrun.Options, io.Writer) (report, error) {
	return func(ctx context.Context, o *options, job jobrun.Options, _ io.Writer) (report, error) {
		p, s := beam.NewPipelineWithRoot()
		if err := build(s, o); err != nil {
			return nil, err
		}
		pr, err := jobrun.Run(ctx, p, job)
		if err != nil {
			return nil, err
		}
		return func(stdout, stderr io.Writer, wall time.Duration) int {
			return summary(stdout, stderr, o, pr, wall)
		}, nil
	}
}

// keepFirst is the build of a KeepFirst sample (orders, userevents, cdc:
// one Config and Result) from the command line.
func keepFirst(build func(beam.Scope, orders.Config) (orders.Result, error)) func(beam.Scope, *options) error {
	return func(s beam.Scope, o *options) error {
		_, err := build(s, orders.Config{Input: o.input, Output: o.output, Errors: o.errors, Dedup: dedupOptions(o)})
		return err
	}
}

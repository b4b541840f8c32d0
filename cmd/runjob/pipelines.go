package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamdedup/beamdedup/pipelines/cdc"
	"github.com/beamdedup/beamdedup/pipelines/jobrun"
	"github.com/beamdedup/beamdedup/pipelines/orders"
	"github.com/beamdedup/beamdedup/pipelines/userevents"
)

// report prints a finished run's summary and returns the exit code.
type report func(stdout, stderr io.Writer, wall time.Duration) int

// pipelineRun is how run handles one pipeline (mode).
type pipelineRun struct {
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

var pipelineNames = []string{"orders", "userevents", "cdc", "streaming", "orderstatus"}

// pipelines holds every pipeline (mode) runjob runs.
var pipelines = map[string]pipelineRun{
	"orders":      filePipeline(buildOrders),
	"userevents":  filePipeline(buildUserEvents),
	"cdc":         filePipeline(buildCDC),
	"orderstatus": orderStatusRun,
	streamingDemo: demoRun,
	streamingLive: liveRun,
}

// pipelineOf returns the run of o's pipeline (mode); checkOptions has
// checked the name.
func pipelineOf(o *options) pipelineRun {
	pl := pipelines[mode(o)]
	if pl.checkRunner == nil {
		pl.checkRunner = func(*options) error { return nil }
	}
	return pl
}

func pipelineOn(o *options) string { return fmt.Sprintf("%s pipeline on %s", o.pipeline, o.runner) }

// filePipeline runs a pipeline that reads a JSON Lines file and writes
// one: build it, run it as a job, summarize its metrics and output.
func filePipeline(build func(s beam.Scope, o *options) error) pipelineRun {
	return pipelineRun{
		prepare:  prepareFiles,
		build:    build,
		describe: pipelineOn,
		run: func(ctx context.Context, o *options, job jobrun.Options, _ io.Writer) (report, error) {
			p, s := beam.NewPipelineWithRoot()
			if err := build(s, o); err != nil {
				return nil, err
			}
			pr, err := jobrun.Run(ctx, p, job)
			if err != nil {
				return nil, err
			}
			return func(stdout, _ io.Writer, wall time.Duration) int {
				summarize(stdout, o, pr, wall)
				return 0
			}, nil
		},
	}
}

func buildOrders(s beam.Scope, o *options) error {
	_, err := orders.Build(s, orders.Config{Input: o.input, Output: o.output, Errors: o.errors, Dedup: dedupOptions(o)})
	return err
}

func buildUserEvents(s beam.Scope, o *options) error {
	_, err := userevents.Build(s, userevents.Config{Input: o.input, Output: o.output, Errors: o.errors, Dedup: dedupOptions(o)})
	return err
}

func buildCDC(s beam.Scope, o *options) error {
	_, err := cdc.Build(s, cdc.Config{Input: o.input, Output: o.output, Errors: o.errors, Dedup: dedupOptions(o)})
	return err
}

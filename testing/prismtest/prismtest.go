// Package prismtest runs the tests' pipelines: Main, the TestMain of a
// package whose tests run pipelines, and Run, a pipeline run as a job with
// a timeout on the test runner (internal/jobrun: the watchdog, the Prism
// split experiment, cancellation in the runner). The test runner is
// ptest's -runner, prism by default: Prism's job server in this process,
// reachable from this machine only (internal/jobrun/localprism), with the
// SDK workers in process (LOOPBACK).
package prismtest

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/internal/jobrun"
	"github.com/beamdedup/beamdedup/internal/jobrun/localprism"
)

// Main is the TestMain of a package whose tests run pipelines: it parses
// the flags, turns Prism's bundle splitting off for what runs Beam
// directly (jobrun.DisableSplits; notes/beam-defects.md 9), points runner
// prism at the in-process job server (so that ptest's own runs use it too,
// not a Prism that beam.Run would open on every interface), and runs the
// tests with Prism as the default runner (ptest.MainWithDefault).
func Main(m *testing.M) {
	flag.Parse()
	jobrun.DisableSplits()
	if runner() == "prism" && *jobopts.Endpoint == "" {
		ep, err := localprism.Endpoint()
		if err != nil {
			fmt.Fprintln(os.Stderr, "prismtest:", err)
			os.Exit(1)
		}
		*jobopts.Endpoint = ep
		if *jobopts.EnvironmentType == "" {
			*jobopts.EnvironmentType = "LOOPBACK"
		}
	}
	ptest.MainWithDefault(m, "prism")
}

// runner is the test runner's name: -runner, else prism.
func runner() string {
	r := *ptest.Runner
	if r == "" {
		r = ptest.DefaultRunner()
	}
	if r == "" || strings.EqualFold(r, "prism") {
		return "prism"
	}
	return r
}

// Job returns the job options of the test runner: ptest's -runner (prism
// by default), on Prism in this process for prism unless --endpoint names
// another job server.
func Job(tb testing.TB) jobrun.Options {
	tb.Helper()
	r := runner()
	if r != "prism" || *jobopts.Endpoint != "" {
		return jobrun.Options{Runner: r}
	}
	o, err := localprism.Options(jobrun.Options{})
	require.NoError(tb, err)
	return o
}

// Options returns Job's options with the timeout: past it the job is
// cancelled and jobrun.Run returns a *jobrun.TimedOut, so a hung pipeline
// cannot hang CI (a job that stops making progress fails sooner, with the
// watchdog's diagnosis).
func Options(tb testing.TB, timeout time.Duration) jobrun.Options {
	tb.Helper()
	o := Job(tb)
	o.Timeout = timeout
	return o
}

// Run runs p as a job on the test runner that must end within timeout
// (Options), fails tb on any error, and returns the job's result.
func Run(tb testing.TB, p *beam.Pipeline, timeout time.Duration) beam.PipelineResult {
	tb.Helper()
	o := Options(tb, timeout)
	start := time.Now()
	pr, err := jobrun.Run(context.Background(), p, o)
	require.NoError(tb, err, "pipeline on %s (timeout %v)", o.Runner, timeout)
	tb.Logf("pipeline ran in %v", time.Since(start).Round(time.Millisecond))
	return pr
}

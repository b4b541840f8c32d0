package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners"

	"github.com/beamdedup/beamdedup/internal/jobrun"
	"github.com/beamdedup/beamdedup/internal/jobrun/localprism"
)

// jobOptions are the job's options from the command line: the runner,
// the stall limit, --graph, and for runner prism without --endpoint a
// Prism job server in this process (LOOPBACK unless --environment_type
// says otherwise), with a warning when other hosts can reach it. Beam's
// other flags reach the runner as they are.
func jobOptions(o *options) (job jobrun.Options, warning string, err error) {
	job = jobrun.Options{Runner: o.runner, StallLimit: o.stallLimit, What: o.pipeline + " job",
		Flink: *o.flink, FlinkREST: o.flinkREST}
	if o.graph != "" {
		job.BeforeSubmit = func(p *beam.Pipeline) error {
			if err := writeGraph(p, o.graph); err != nil {
				return fmt.Errorf("writing --graph: %w", err)
			}
			return nil
		}
	}
	if o.runner == "flink" && o.flinkREST == "" && o.stallLimit >= 0 {
		warning = "--runner=flink without --flink_rest: no watchdog (Beam's Flink runner reports a job's metrics only when it ends, so a healthy job would look stalled); --timeout still bounds the job. Give --flink_rest=HOST:PORT, the job server's --flink-master, to have one"
	}
	if o.runner != "prism" || *jobopts.Endpoint != "" {
		return job, warning, nil
	}
	job, err = localprism.Options(job)
	if err != nil {
		return job, "", err
	}
	if err := localprism.Exposed(); err != nil {
		warning = fmt.Sprintf("%v (docs/workers.md, \"Who can reach the job server\")", err)
	}
	return job, warning, nil
}

// probeTimeout bounds the check that a job server is listening. Beam's
// universal runner otherwise waits 2 minutes on a dead endpoint.
var probeTimeout = 3 * time.Second

// resolveRunner returns the runner to use for --runner, with a notice to
// print when it differs from the one asked for, or an error that says what
// is missing. For runners that submit to a job server it checks that the
// endpoint accepts connections.
func resolveRunner(ctx context.Context) (runner, notice string, err error) {
	r := strings.ToLower(*runners.Runner)
	switch r {
	case "", "prism", "prismrunner":
		if *jobopts.Endpoint != "" { // a standalone Prism job server
			if err := probe(ctx, "prism"); err != nil {
				return "", "", err
			}
		}
		return "prism", "", probeWorkerPool(ctx)
	case "direct", "directrunner":
		// Beam Go's direct runner is deprecated and has neither state nor
		// timers, which KeepFirst's streaming expansion needs.
		return "prism", "--runner=direct: Beam Go's direct runner supports neither state nor timers, which KeepFirst needs; running on prism (Beam's local runner) instead", nil
	case "universal", "portable", "portablerunner", "flink", "flinkrunner", "spark", "sparkrunner":
		name := cmp.Or(map[string]string{"portablerunner": "portable", "flinkrunner": "flink", "sparkrunner": "spark"}[r], r)
		if *jobopts.Endpoint == "" {
			return "", "", fmt.Errorf("--runner=%s needs --endpoint=HOST:PORT of a running Beam job server%s", name, jobServerHint(name))
		}
		if err := probe(ctx, name); err != nil {
			return "", "", err
		}
		// Beam's default environment, DOCKER, runs the workers in Docker
		// containers beside the job server: without a Docker engine the job
		// would fail at its first docker run, after Beam compiled this
		// program for them. A Flink or Spark job server started for
		// development has none.
		if *jobopts.EnvironmentType == "" {
			if name == "flink" || name == "spark" {
				flag.CommandLine.Set("environment_type", "LOOPBACK")
				notice = fmt.Sprintf("--runner=%s: no --environment_type given: LOOPBACK (the SDK workers in this process; EXTERNAL with a worker pool, see docs/workers.md)", name)
			} else if _, err := exec.LookPath("docker"); err != nil {
				return "", "", fmt.Errorf("--runner=%s: no --environment_type given, and Beam's default, DOCKER, needs a Docker engine beside the job server (docker is not on PATH here): give --environment_type=LOOPBACK (the SDK workers in this process), EXTERNAL with a worker pool, or PROCESS (docs/runners.md, \"Where the SDK workers run\")", name)
			}
		}
		return name, notice, probeWorkerPool(ctx)
	case "dataflow", "dataflowrunner":
		return "dataflow", "", nil
	case "dot":
		if flagValue("dot_file") == "" {
			return "", "", fmt.Errorf("--runner=dot needs --dot_file=FILE (or use --graph=FILE with any runner)")
		}
		return "dot", "", nil
	}
	return "", "", fmt.Errorf("--runner=%q: want prism (default), direct (runs on prism), universal or portable, flink, spark, dataflow or dot", *runners.Runner)
}

func jobServerHint(runner string) string {
	switch runner {
	case "flink":
		return " (start Beam's Flink job server: go run ./cmd/flinkjobserver prints its endpoint; see docs/flink.md)"
	case "spark":
		return " (start Beam's Spark job server: go run ./testing/flinktest/cmd/sparkjobserver prints its endpoint; see docs/runners.md)"
	}
	return " (e.g. a standalone Prism: go run github.com/apache/beam/sdks/v2/go/cmd/prism serves localhost:8073)"
}

// probe dials the job server endpoint with a short timeout.
func probe(ctx context.Context, runner string) error {
	addr := *jobopts.Endpoint
	if i := strings.Index(addr, "://"); i >= 0 {
		addr = addr[i+3:]
	}
	if err := dial(ctx, addr); err != nil {
		return fmt.Errorf("--runner=%s: no job server at --endpoint=%s (%v)%s", runner, *jobopts.Endpoint, err, jobServerHint(runner))
	}
	return nil
}

// dial checks that addr accepts TCP connections within probeTimeout.
func dial(ctx context.Context, addr string) error {
	c, err := (&net.Dialer{Timeout: probeTimeout}).DialContext(ctx, "tcp", addr)
	if err == nil {
		c.Close()
	}
	return err
}

// probeWorkerPool dials the worker pool of an EXTERNAL environment: a job
// server cannot start workers without it, and Prism v2.77.0 crashes
// (notes/beam-defects.md, "Prism crashes when the worker pool is
// unreachable").
func probeWorkerPool(ctx context.Context) error {
	if !strings.EqualFold(*jobopts.EnvironmentType, "external") {
		return nil
	}
	addr := *jobopts.EnvironmentConfig
	if addr == "" {
		return fmt.Errorf("--environment_type=EXTERNAL needs --environment_config=HOST:PORT of a worker pool (see docs/workers.md)")
	}
	if err := dial(ctx, addr); err != nil {
		return fmt.Errorf("--environment_type=EXTERNAL: no worker pool at --environment_config=%s (%v); start one first (see docs/workers.md): a job server cannot start the SDK workers without it, and Prism v2.77.0 crashes", addr, err)
	}
	return nil
}

// runnerNote describes the runner for the summary.
func runnerNote(runner string) string {
	switch {
	case runner == "prism" && *jobopts.Endpoint != "" && !strings.HasPrefix(*jobopts.Endpoint, "localhost:") && !strings.HasPrefix(*jobopts.Endpoint, "127.0.0.1:"):
		return "prism at " + *jobopts.Endpoint
	case runner == "prism":
		return "prism (Beam's local runner, in process)"
	case runner == "dataflow" || runner == "dot":
		return runner
	}
	return fmt.Sprintf("%s via the job server at %s (environment %s)", runner, *jobopts.Endpoint, envType())
}

func envType() string {
	if *jobopts.EnvironmentType == "" {
		return "DOCKER, the default"
	}
	return *jobopts.EnvironmentType
}

// Command versus runs Beam Python's DeduplicatePerKey (beampython/) and our
// KeepFirst on the same orders file, on the same Prism binary (the one
// testing/jobservertest builds from the Beam Go module we link), with the
// SDK workers in the submitting process (LOOPBACK), alternating runs, and
// prints rows/s and Fn API state requests per row for each run.
//
//	go run ./testing/peers/cmd/peerdata --kind=orders --count=20000 --out=/tmp/peers/orders.jsonl
//	go run ./testing/peers/cmd/versus --input=/tmp/peers/orders.jsonl --runs=3
//
// Python's requests are counted in its SDK harness (GrpcStateHandler),
// ours by our counters (state_gets + state_appends + state_clears, which
// testing/bench checks against the requests sent). Both are keyed
// stateful steps on the whole file: ours with AsStream, row by row
// (MiniBatch(false)) and with the mini-batch fold, each with our default
// 2 h StateTTL; Python's with a 2 h event-time duration.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/universal"

	"github.com/beamdedup/beamdedup/internal/jobrun"
	"github.com/beamdedup/beamdedup/pipelines/orders"
	"github.com/beamdedup/beamdedup/testing/deduptest"
	"github.com/beamdedup/beamdedup/testing/jobservertest"
	"github.com/beamdedup/beamdedup/testing/peers"
	"github.com/beamdedup/beamdedup/transforms/dedup"
)

func main() {
	input := flag.String("input", "", "orders, JSON Lines (testing/peers/cmd/peerdata --kind=orders)")
	runs := flag.Int("runs", 3, "runs of each, alternating")
	python := flag.String("python", peers.PythonDefault(), "the Python with apache-beam 2.77.0 (.ci/run makes this venv)")
	flag.Parse()
	beam.Init()
	if *input == "" {
		fail(fmt.Errorf("--input is required"))
	}
	abs, err := filepath.Abs(*input)
	fail(err)
	prism, err := jobservertest.Binary()
	fail(err)
	fmt.Printf("prism %s\ninput %s\n", prism, abs)
	for i := range *runs {
		for _, mini := range []bool{false, true} {
			c, secs, err := ours(prism, abs, mini)
			fail(err)
			fmt.Printf("run %d keepfirst_minibatch_%v rows=%d emitted=%d seconds=%.3f rows_per_s=%.0f requests_per_row=%.3f\n",
				i+1, mini, c.RowsIn, c.Emitted, secs, float64(c.RowsIn)/secs, float64(deduptest.StateRequests(c.Cost))/float64(c.RowsIn))
		}
		res, err := peers.RunPython(context.Background(), *python, prism, abs)
		fail(err)
		p := res["beam_python"]
		fmt.Printf("run %d beam_python rows=%s emitted=%s seconds=%s rows_per_s=%s requests_per_row=%s\n",
			i+1, p["rows"], p["emitted"], p["seconds"], p["rows_per_s"], p["requests_per_row"])
	}
}

// ours runs the orders pipeline's KeepFirst, stateful, on a Prism of its
// own started from the binary, and returns its counters and the job's
// seconds from its submission.
func ours(prism, input string, miniBatch bool) (dedup.Counters, float64, error) {
	endpoint, stop, err := startPrism(prism)
	if err != nil {
		return dedup.Counters{}, 0, err
	}
	defer stop()
	p, s := beam.NewPipelineWithRoot()
	if _, err := orders.Build(s, orders.Config{Input: input, Dedup: []dedup.Option{dedup.AsStream(), dedup.MiniBatch(miniBatch)}}); err != nil {
		return dedup.Counters{}, 0, err
	}
	start := time.Now()
	pr, err := jobrun.Run(context.Background(), p, jobrun.Options{Runner: "universal", Endpoint: endpoint, EnvironmentType: "LOOPBACK",
		StallLimit: time.Minute, What: "orders job"})
	if err != nil {
		return dedup.Counters{}, 0, err
	}
	return dedup.ReadCounters(pr), time.Since(start).Seconds(), nil
}

func startPrism(bin string) (string, func(), error) {
	port, err := jobservertest.FreePort()
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command(bin, "--job_port="+strconv.Itoa(port), "--serve_http=false", "--log_level=warn")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() }
	addr := net.JoinHostPort("localhost", strconv.Itoa(port))
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return addr, stop, nil
		}
	}
	stop()
	return "", nil, fmt.Errorf("prism not listening on %s", addr)
}

func fail(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "versus:", err)
		os.Exit(1)
	}
}

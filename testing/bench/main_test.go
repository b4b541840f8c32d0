package bench_test

import (
	"bytes"
	"fmt"
	"github.com/beamdedup/beamdedup/testing/bench"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamdedup/beamdedup/testing/prismtest"
)

// TestMain runs every pipeline of this package with Prism's bundle splitting
// off: a split of a stateful stage's bundle can process one key in two
// bundles at once and emit its first row twice (notes/beam-defects.md 9),
// which a loaded machine triggers. The reproduction turns it back on.
// It also counts every Fn API state request the in-process workers send
// (bench.CountStateRequests), which the budget tests and the benchmarks read.
func TestMain(m *testing.M) {
	bench.CountStateRequests()
	prismtest.Main(m)
}

// runOnPrism is prismtest.Run that also returns the run's wall time
// (construction excluded).
func runOnPrism(tb testing.TB, p *beam.Pipeline, deadline time.Duration) (beam.PipelineResult, time.Duration) {
	tb.Helper()
	start := time.Now()
	pr := prismtest.Run(tb, p, deadline)
	return pr, time.Since(start)
}

// envInt reads a positive integer from the environment.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// load1 is the one-minute load average, reported next to every timing:
// the machine is shared, and a load above the core count slows a run.
func load1() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := bytes.Fields(b)
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(string(f[0]), 64)
	return v
}

// logTable prints a benchmark's table of medians. A benchmark that runs
// sub-benchmarks shows its own log only with -v, so the table goes to the
// standard output, where the results go, and to the log.
func logTable(b *testing.B, table string) {
	b.Log("\n" + table)
	if !testing.Verbose() {
		fmt.Println(table)
	}
}

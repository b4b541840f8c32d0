package bench_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/flink"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/internal/flinkopts"
	"github.com/beamdedup/beamdedup/internal/flinkserver"
	"github.com/beamdedup/beamdedup/internal/jobrun"
	"github.com/beamdedup/beamdedup/testing/bench"
	"github.com/beamdedup/beamdedup/testing/flinktest"
	"github.com/beamdedup/beamdedup/testing/peers"
	"github.com/beamdedup/beamdedup/testing/rsstest"
	"github.com/beamdedup/beamdedup/transforms/dedup"
)

// flinkCase is one job of BenchmarkFlinkCluster: ours, at a parallelism.
type flinkCase struct {
	name string
	opts []dedup.Option
}

// flinkCases are ours on the cluster: KeepFirst as runjob runs the orders
// pipeline with --force_stateful (AsStream: on a file, state per bucket),
// in streaming mode, as a Kafka or Pub/Sub job runs.
var flinkCases = []flinkCase{
	{"keepfirst_stateful", []dedup.Option{dedup.AsStream()}},
}

// flinkOrdersFile is the orders file of BenchmarkFlinkCluster: that of
// BEAMDEDUP_FLINK_ORDERS_FILE, or one of BEAMDEDUP_FLINK_ORDERS_COUNT
// orders (default 850,000: 1,007,166 rows) generated once per machine.
func flinkOrdersFile(tb testing.TB) string {
	return benchOrdersFile(tb, "BEAMDEDUP_FLINK_ORDERS_FILE", "BEAMDEDUP_FLINK_ORDERS_COUNT", 850_000)
}

// BenchmarkFlinkCluster holds ours to Flink SQL on a Flink session cluster
// of this machine (testing/flinktest: a JobManager and one TaskManager of
// two slots, Flink 1.19, Beam 2.62's job server), on one orders file of a
// million rows: per round, at parallelism 1 and 2, Flink SQL's keep-first
// submitted to the cluster (testing/peers), then our KeepFirst (the orders
// pipeline's stateful expansion in streaming mode, its Go workers in this
// process: LOOPBACK), each reporting rows/s and CPU per row (the
// TaskManager's JVM, and for ours this process too) and ours x_flinksql
// (÷ Flink SQL's rows/s of the same round and parallelism); after the
// rounds (BEAMDEDUP_FLINK_ROUNDS, default 3) the medians, as a table in
// the log. One TaskManager: LOOPBACK workers serve one
// (notes/beam-defects.md 20).
//
//	go test -run='^$' -bench=FlinkCluster -benchtime=1x -timeout=3h ./testing/bench/
func BenchmarkFlinkCluster(b *testing.B) {
	input := flinkOrdersFile(b)
	rows := countLines(b, input)
	c, err := flinktest.StartCluster(flinktest.ClusterConfig{TaskManagers: 1, Slots: 2})
	if err != nil {
		flinktest.SkipOrFail(b, err)
		return
	}
	defer c.Stop()
	clusterCP, err := flinkserver.Project.Classpath()
	require.NoError(b, err)
	rounds := envInt("BEAMDEDUP_FLINK_ROUNDS", 3)
	runs := map[string][]ordersRun{}
	ratios := map[string][]float64{}
	for round := 1; round <= rounds; round++ {
		b.Run(fmt.Sprintf("round%d", round), func(b *testing.B) {
			for _, par := range []int{1, 2} {
				flink := 0.0
				sql := fmt.Sprintf("flinksql_keep_first_p%d", par)
				b.Run(sql, func(b *testing.B) {
					r := flinkSQLOnCluster(b, c, clusterCP, par, input, rows)
					flink = r.rate
					runs[sql] = append(runs[sql], r)
				})
				for _, fc := range flinkCases {
					name := fmt.Sprintf("%s_p%d", fc.name, par)
					b.Run(name, func(b *testing.B) {
						r := runOnCluster(b, c, fc, par, input, rows)
						runs[name] = append(runs[name], r)
						if flink > 0 {
							b.ReportMetric(r.rate/flink, "x_flinksql")
							ratios[name] = append(ratios[name], r.rate/flink)
						}
					})
				}
			}
		})
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "orders file on the Flink cluster, %d rows: medians of the rounds\n\n| case | rows/s | cpu µs/row | ÷ Flink SQL |\n| --- | ---: | ---: | ---: |\n", rows)
	for _, par := range []int{1, 2} {
		for _, name := range append([]string{fmt.Sprintf("flinksql_keep_first_p%d", par)}, flinkCaseNames(par)...) {
			rs := runs[name]
			if len(rs) == 0 {
				continue
			}
			fmt.Fprintf(&sb, "| %s | %.1f K | %.1f | %s |\n", name, bench.Median(field(rs, func(r ordersRun) float64 { return r.rate }))/1e3,
				bench.Median(field(rs, func(r ordersRun) float64 { return r.cpuPerRow })), ratioCell(ratios[name]))
		}
	}
	logTable(b, sb.String())
}

// flinkCaseNames are the names of our cases at parallelism par.
func flinkCaseNames(par int) []string {
	var names []string
	for _, fc := range flinkCases {
		names = append(names, fmt.Sprintf("%s_p%d", fc.name, par))
	}
	return names
}

// flinkSQLOnCluster runs Flink SQL's keep-first on the cluster at
// parallelism par (testing/peers: its job's time, from its submission to
// its end; the TaskManager's CPU), or skips without a JDK.
func flinkSQLOnCluster(b *testing.B, c *flinktest.Cluster, clusterCP string, par int, input string, rows int) ordersRun {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	jvm0 := jvmCPU(b, c)
	res, err := peers.RunOnCluster(ctx, c.REST, clusterCP, par, input, "keep_first")
	if err != nil {
		b.Skipf("Flink SQL not run: %v", err)
	}
	cpu := jvmCPU(b, c) - jvm0
	secs, err := strconv.ParseFloat(res["cluster_keep_first"]["seconds"], 64)
	require.NoError(b, err)
	r := ordersRun{rate: float64(rows) / secs, cpuPerRow: cpu.Seconds() * 1e6 / float64(rows)}
	b.ReportMetric(r.rate, "rows/s")
	b.ReportMetric(r.cpuPerRow, "cpu_µs/row")
	b.ReportMetric(load1(), "load1")
	return r
}

// runOnCluster runs one of our cases on the cluster at parallelism par
// and checks its output.
func runOnCluster(b *testing.B, c *flinktest.Cluster, fc flinkCase, par int, input string, rows int) ordersRun {
	out := filepath.Join(b.TempDir(), "out.jsonl")
	p, s := beam.NewPipelineWithRoot()
	require.NoError(b, ordersPipeline(nil, fc.opts...)(s, input, out))
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	cpu0, jvm0 := rsstest.CPUTime(), jvmCPU(b, c)
	start := time.Now()
	_, err := jobrun.Run(ctx, p, jobrun.Options{
		Runner: "flink", Endpoint: c.Endpoint, FlinkREST: c.REST, EnvironmentType: "LOOPBACK", Parallelism: par,
		StallLimit: 5 * time.Minute, What: b.Name(), Flink: flinkopts.Options{Streaming: true},
	})
	d := time.Since(start)
	require.NoError(b, err)
	cpu := rsstest.CPUTime() - cpu0 + jvmCPU(b, c) - jvm0
	require.Equal(b, distinctOrders(b, input), countLines(b, out+"*"), "one line per order_id")
	r := ordersRun{rate: float64(rows) / d.Seconds(), cpuPerRow: cpu.Seconds() * 1e6 / float64(rows)}
	b.ReportMetric(r.rate, "rows/s")
	b.ReportMetric(r.cpuPerRow, "cpu_µs/row")
	b.ReportMetric(load1(), "load1")
	return r
}

// jvmCPU is the CPU time the cluster's TaskManagers used so far.
func jvmCPU(tb testing.TB, c *flinktest.Cluster) time.Duration {
	var total time.Duration
	for _, tm := range c.TaskManagers() {
		total += procCPU(tb, tm.Pid())
	}
	return total
}

// procCPU is the user and system CPU time of process pid (/proc).
func procCPU(tb testing.TB, pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	require.NoError(tb, err)
	// The fields after the command (which may hold spaces), from the third.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	require.NoError(tb, err1)
	require.NoError(tb, err2)
	return time.Duration(utime+stime) * time.Second / 100 // clock ticks of 1/100 s
}

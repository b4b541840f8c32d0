package bench_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/pipelines/jsonl"
	"github.com/beamdedup/beamdedup/pipelines/orders"
	"github.com/beamdedup/beamdedup/testing/bench"
	"github.com/beamdedup/beamdedup/testing/peers"
	"github.com/beamdedup/beamdedup/testing/rsstest"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// ordersCase is one pipeline of BenchmarkOrdersFile over the orders file:
// ours as runjob builds it, or one of the runner's floors.
type ordersCase struct {
	name  string
	build func(s beam.Scope, input, output string) error
	// flink names the Flink SQL result ours is held to (keep_first,
	// keep_last); "" for a floor.
	flink string
	// floor names the case whose rate this one's is divided by (x_floor).
	floor string
	// perKey: the case writes one line per order_id (every case but the
	// floors of a stateful step, which write every row).
	perKey bool
}

// The orders-file floors: the shapes of the two expansions with nothing of
// ours in them (bench.LinesFloor), then with the file parsed into rows and
// written back by pipelines/jsonl (bench.RowsFloor).
const (
	floorLinesShuffle  = "floor_lines_shuffle"
	floorLinesStateful = "floor_lines_stateful"
)

// ordersCases are the floors, then ours: KeepFirst as runjob runs the
// orders pipeline (orders.Build: StateTTL 2 h), with the bounded expansion
// and --force_stateful's; KeepLast by order_id with the same options and
// upserts (the file has no kind column).
var ordersCases = []ordersCase{
	{name: "floor_lines_copy", build: func(s beam.Scope, in, out string) error {
		bench.CopyFloor(s, in, out)
		return nil
	}},
	linesFloor(floorLinesShuffle, bench.Shuffle, true),
	linesFloor(floorLinesStateful, bench.Stateful, false),
	linesFloor("floor_lines_protocol", bench.Protocol, true),
	linesFloor("floor_lines_bucketed", bench.Bucketed, true),
	linesFloor("floor_lines_bucketed_state", bench.BucketedState, true),
	{name: "floor_rows_shuffle", perKey: true, floor: floorLinesShuffle, build: func(s beam.Scope, in, out string) error {
		return bench.RowsFloor(s, in, out, false)
	}},
	{name: "floor_rows_stateful", floor: floorLinesStateful, build: func(s beam.Scope, in, out string) error {
		return bench.RowsFloor(s, in, out, true)
	}},
	{name: "keepfirst_bounded", flink: "keep_first", floor: floorLinesShuffle, perKey: true, build: ordersPipeline(nil)},
	{name: "keepfirst_stateful", flink: "keep_first", floor: floorLinesStateful, perKey: true, build: ordersPipeline(nil, dedup.AsStream())},
	{name: "keeplast_bounded", flink: "keep_last", floor: floorLinesShuffle, perKey: true, build: ordersPipeline(dedup.TryKeepLast, rowspec.Upsert())},
	{name: "keeplast_stateful", flink: "keep_last", floor: floorLinesStateful, perKey: true, build: ordersPipeline(dedup.TryKeepLast, rowspec.Upsert(), dedup.AsStream())},
}

// linesFloor is the case of bench.LinesFloor of shape.
func linesFloor(name string, shape int, perKey bool) ordersCase {
	return ordersCase{name: name, perKey: perKey, build: func(s beam.Scope, in, out string) error {
		bench.LinesFloor(s, in, out, shape)
		return nil
	}}
}

// ordersPipeline is the orders pipeline (orders.Build) with extra dedup
// options, or with last set, the same body around KeepLast: the rows, the
// output and the dead letters (none) written as the pipeline writes them.
func ordersPipeline(last func(beam.Scope, beam.PCollection, ...dedup.Option) (dedup.Result, error), opts ...dedup.Option) func(beam.Scope, string, string) error {
	return func(s beam.Scope, in, out string) error {
		if last == nil {
			_, err := orders.Build(s, orders.Config{Input: in, Output: out, Dedup: opts})
			return err
		}
		s = s.Scope("OrdersLast")
		rows, bad, err := jsonl.Read(s, in, reflect.TypeFor[orders.Order]())
		if err != nil {
			return err
		}
		res, err := last(s, rows, append([]dedup.Option{rowspec.PartitionBy("order_id"), dedup.StateTTL(orders.DefaultStateTTL), dedup.UID(orders.UID)}, opts...)...)
		if err != nil {
			return err
		}
		jsonl.Write(s.Scope("Output"), out, res.Rows)
		jsonl.Write(s.Scope("Errors"), jsonl.ErrorsPath(out), beam.Flatten(s, bad, jsonl.FromDeadLetters(s, res.DeadLetters)))
		return nil
	}
}

// ordersFile is the orders file of BEAMDEDUP_ORDERS_FILE, or one of
// BEAMDEDUP_ORDERS_COUNT orders (default 500,000; seed 1, as peerdata
// writes it) generated once per machine into the temporary directory.
func ordersFile(tb testing.TB) string {
	return benchOrdersFile(tb, "BEAMDEDUP_ORDERS_FILE", "BEAMDEDUP_ORDERS_COUNT", 500_000)
}

// benchOrdersFile is the file that the environment variable fileVar
// names, or one of countVar's number of orders (def by default; seed 1)
// generated once per machine into the temporary directory.
func benchOrdersFile(tb testing.TB, fileVar, countVar string, def int) string {
	tb.Helper()
	if f := os.Getenv(fileVar); f != "" {
		abs, err := filepath.Abs(f)
		require.NoError(tb, err)
		return abs
	}
	n := envInt(countVar, def)
	path := filepath.Join(os.TempDir(), "beamdedup-bench", fmt.Sprintf("orders-%d-seed1.jsonl", n))
	generated.Lock()
	defer generated.Unlock()
	if _, err := os.Stat(path); err == nil {
		return path
	}
	require.NoError(tb, os.MkdirAll(filepath.Dir(path), 0o755))
	tmp := fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
	require.NoError(tb, orders.WriteSample(tmp, n, 1))
	require.NoError(tb, os.Rename(tmp, path))
	return path
}

// generated serialises the generation of the orders files.
var generated sync.Mutex

// ordersRun is what one case's run measured.
type ordersRun struct {
	rate, cpuPerRow float64 // rows/s of the input's rows; CPU µs per row
}

// BenchmarkOrdersFile holds ours to Flink SQL on one orders file
// (ordersFile): per round, Flink SQL's keep-first and keep-last (one JVM,
// testing/peers), the runner's floors, then our KeepFirst and KeepLast,
// bounded and stateful, each reporting rows/s, CPU per row (of the JVM for
// Flink SQL, of this process, Prism in it, for ours), x_flinksql (its
// rows/s ÷ Flink SQL's of the same round) and x_floor (÷ the floor of its
// shape); after the rounds (BEAMDEDUP_ORDERS_ROUNDS, default 3) the
// medians, as a table in the log. Without a JDK Flink SQL is skipped and
// only the floors are ratios.
//
//	go test -run='^$' -bench=OrdersFile -benchtime=1x -timeout=3h ./testing/bench/
//	BEAMDEDUP_ORDERS_ROUNDS=1 go test -run='^$' -bench='OrdersFile/round1/keepfirst_bounded$' -benchtime=1x -cpuprofile=cpu.out ./testing/bench/
func BenchmarkOrdersFile(b *testing.B) {
	input := ordersFile(b)
	rows := countLines(b, input)
	rounds := envInt("BEAMDEDUP_ORDERS_ROUNDS", 3)
	runs := map[string][]ordersRun{} // by case, one per round
	ratios := map[string][]float64{} // "case x_flinksql" and "case x_floor", per round
	for round := 1; round <= rounds; round++ {
		b.Run(fmt.Sprintf("round%d", round), func(b *testing.B) {
			flink := map[string]float64{} // keep_first, keep_last: Flink SQL's rows/s this round
			b.Run("flinksql", func(b *testing.B) {
				res := runFlinkSQL(b, input)
				for _, q := range []string{"keep_first", "keep_last"} {
					r := res["orders_"+q]
					require.NotNil(b, r, "Flink SQL's %s result", q)
					require.Equal(b, strconv.Itoa(rows), r["rows"], "Flink SQL read every line")
					secs, err := strconv.ParseFloat(r["seconds"], 64)
					require.NoError(b, err)
					cpu, err := strconv.ParseFloat(r["cpu_seconds"], 64)
					require.NoError(b, err)
					flink[q] = float64(rows) / secs
					run := ordersRun{rate: flink[q], cpuPerRow: cpu * 1e6 / float64(rows)}
					b.ReportMetric(run.rate, q+"_rows/s")
					b.ReportMetric(run.cpuPerRow, q+"_cpu_µs/row")
					runs["flinksql_"+q] = append(runs["flinksql_"+q], run)
				}
				if scan, err := strconv.ParseFloat(res["orders_keep_first"]["scan_seconds"], 64); err == nil {
					b.ReportMetric(float64(rows)/scan, "scan_rows/s")
				}
				b.ReportMetric(load1(), "load1")
			})
			rates := map[string]float64{}
			for _, c := range ordersCases {
				b.Run(c.name, func(b *testing.B) {
					r := runOrdersCase(b, c, input, rows)
					rates[c.name] = r.rate
					runs[c.name] = append(runs[c.name], r)
					if f, ok := flink[c.flink]; ok && f > 0 {
						b.ReportMetric(r.rate/f, "x_flinksql")
						ratios[c.name+" x_flinksql"] = append(ratios[c.name+" x_flinksql"], r.rate/f)
					}
					if f, ok := rates[c.floor]; ok && f > 0 {
						b.ReportMetric(r.rate/f, "x_floor")
						ratios[c.name+" x_floor"] = append(ratios[c.name+" x_floor"], r.rate/f)
					}
				})
			}
		})
	}
	logTable(b, ordersTable(rows, runs, ratios))
}

// runFlinkSQL runs the Flink SQL peer's orders queries over input (one
// JVM: the counts, a plain scan, keep-first, keep-last), or skips.
func runFlinkSQL(b *testing.B, input string) map[string]peers.Fields {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	res, err := peers.Run(ctx, peers.FlinkSQL, peers.FlinkSQLMain, "orders", input)
	if err != nil {
		b.Skipf("Flink SQL not run: %v", err)
	}
	return res
}

// runOrdersCase runs c once over input (rows lines) on Prism in process
// and checks its output.
func runOrdersCase(b *testing.B, c ordersCase, input string, rows int) ordersRun {
	out := filepath.Join(b.TempDir(), "out.jsonl")
	p, s := beam.NewPipelineWithRoot()
	require.NoError(b, c.build(s, input, out))
	bench.ResetStateRequests()
	cpu0 := rsstest.CPUTime()
	pr, d := runOnPrism(b, p, 2*time.Hour)
	cpu := rsstest.CPUTime() - cpu0
	lines := countLines(b, out+"*")
	var requests int64
	for _, r := range bench.AllStateRequests() {
		requests += r.Total()
	}
	if c.perKey {
		if c.flink != "" {
			in := dedup.ReadCounters(pr).RowsIn + dedup.ReadLastCounters(pr).RowsIn
			require.Equal(b, int64(rows), in, "rows into the dedup step")
		}
		require.Equal(b, distinctOrders(b, input), lines, "one line per order_id")
	} else {
		require.Equal(b, rows, lines, "every row written")
	}
	r := ordersRun{rate: float64(rows) / d.Seconds(), cpuPerRow: cpu.Seconds() * 1e6 / float64(rows)}
	b.ReportMetric(r.rate, "rows/s")
	b.ReportMetric(r.cpuPerRow, "cpu_µs/row")
	b.ReportMetric(float64(requests)/float64(rows), "requests/row")
	b.ReportMetric(load1(), "load1")
	return r
}

// distinctOrders is the number of distinct order_ids of the orders file
// input, counted once per file and process (outside any timing).
func distinctOrders(tb testing.TB, input string) int {
	tb.Helper()
	distinctMu.Lock()
	defer distinctMu.Unlock()
	if n, ok := distinctCounts[input]; ok {
		return n
	}
	data, err := os.ReadFile(input)
	require.NoError(tb, err)
	ids := map[string]bool{}
	for line := range strings.Lines(string(data)) {
		var o struct {
			OrderID string `json:"order_id"`
		}
		require.NoError(tb, json.Unmarshal([]byte(line), &o), "a line of %s", input)
		ids[o.OrderID] = true
	}
	distinctCounts[input] = len(ids)
	return len(ids)
}

var (
	distinctMu     sync.Mutex
	distinctCounts = map[string]int{}
)

// countLines counts the lines of the files matching glob.
func countLines(tb testing.TB, glob string) int {
	tb.Helper()
	files, err := filepath.Glob(glob)
	require.NoError(tb, err)
	require.NotEmpty(tb, files, "no file matches %s", glob)
	n := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(tb, err)
		n += strings.Count(string(data), "\n")
	}
	return n
}

// ordersTable renders the medians of the rounds: each case's rows/s and
// CPU per row, and the medians of its per-round ratios.
func ordersTable(rows int, runs map[string][]ordersRun, ratios map[string][]float64) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "orders file, %d rows: medians of the rounds\n\n", rows)
	sb.WriteString("| case | rows/s | cpu µs/row | ÷ Flink SQL | ÷ floor |\n| --- | ---: | ---: | ---: | ---: |\n")
	names := []string{"flinksql_keep_first", "flinksql_keep_last"}
	for _, c := range ordersCases {
		names = append(names, c.name)
	}
	for _, n := range names {
		rs := runs[n]
		if len(rs) == 0 {
			continue
		}
		rate := bench.Median(field(rs, func(r ordersRun) float64 { return r.rate }))
		cpu := bench.Median(field(rs, func(r ordersRun) float64 { return r.cpuPerRow }))
		fmt.Fprintf(&sb, "| %s | %.1f K | %.1f | %s | %s |\n", n, rate/1e3, cpu,
			ratioCell(ratios[n+" x_flinksql"]), ratioCell(ratios[n+" x_floor"]))
	}
	return sb.String()
}

// ratioCell is a median ratio with the rounds' ratios in brackets.
func ratioCell(rs []float64) string {
	switch len(rs) {
	case 0:
		return ""
	case 1:
		return fmt.Sprintf("%.3f", rs[0])
	}
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = fmt.Sprintf("%.3f", r)
	}
	return fmt.Sprintf("%.3f (%s)", bench.Median(rs), strings.Join(parts, ", "))
}

// field is f of each of xs.
func field[T any](xs []T, f func(T) float64) []float64 {
	vs := make([]float64, len(xs))
	for i, x := range xs {
		vs[i] = f(x)
	}
	return vs
}

// TestOrdersFileCases_WriteOneLinePerOrder is the benchmark's smoke run in
// the suite: each case of BenchmarkOrdersFile on 300 orders writes one
// line per order_id (the floors of a stateful step, every row).
func TestOrdersFileCases_WriteOneLinePerOrder(t *testing.T) {
	dir := t.TempDir()
	input := filepath.Join(dir, "orders.jsonl")
	require.NoError(t, orders.WriteSample(input, 300, 1))
	rows := len(orders.Generate(300, 1))
	for _, c := range ordersCases {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out.jsonl")
			p, s := beam.NewPipelineWithRoot()
			require.NoError(t, c.build(s, input, out))
			runOnPrism(t, p, 2*time.Minute)
			want := 300
			if !c.perKey {
				want = rows
			}
			assert.Equal(t, want, countLines(t, out+"*"))
		})
	}
}

func TestOrdersTable_ShowsTheMediansOfTheRounds(t *testing.T) {
	table := ordersTable(353, map[string][]ordersRun{
		"flinksql_keep_first": {{rate: 100e3, cpuPerRow: 10}},
		"keepfirst_bounded":   {{rate: 40e3, cpuPerRow: 30}, {rate: 60e3, cpuPerRow: 20}, {rate: 50e3, cpuPerRow: 25}},
	}, map[string][]float64{"keepfirst_bounded x_flinksql": {0.4, 0.6, 0.5}})
	assert.Contains(t, table, "orders file, 353 rows")
	assert.Contains(t, table, "| flinksql_keep_first | 100.0 K | 10.0 |  |  |")
	assert.Contains(t, table, "| keepfirst_bounded | 50.0 K | 25.0 | 0.500 (0.400, 0.600, 0.500) |  |")
}

package bench_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/filter"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/testing/bench"
	"github.com/beamdedup/beamdedup/testing/rsstest"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// pipelineCase is one pipeline of the grid, applied to the generated rows.
type pipelineCase struct {
	name string
	// build returns the PCollection whose elements the sink counts.
	build func(s beam.Scope, rows beam.PCollection) beam.PCollection
	// out is the number of output elements expected.
	out func(w bench.Workload) int64
	// dedup: the case is a KeepFirst or KeepLast, so its state counters
	// are reported.
	dedup bool
	// stateful: the case has a stateful step, so its ratio to the
	// runner's ceiling (bz) is reported.
	stateful bool
	// insertOnly: the rows carry no kind (bench.Workload.InsertOnly): the
	// case writes kinds into the kind column without reading any.
	insertOnly bool
	// last: the case is a KeepLast: its output must be what its counters
	// say it emitted, every row in one outcome, and its updates per row are
	// reported.
	last bool
	// folds: a mini-batch fold may merge a key's rows before the state;
	// when it did, the output is only known to lie between one row per key
	// and out (what every row reaching the state gives). KeepLast's fold is
	// being added; once it is in, one bundle folds to about one row per key.
	folds bool
	// vsDistinct: the case is a bounded dedup, reported as a ratio to g
	// (filter.Distinct) too.
	vsDistinct bool
	// terminal: the sink is fused with the last step instead of following
	// a Reshuffle.
	terminal bool
}

func allRows(w bench.Workload) int64 { return int64(w.Rows) }
func allKeys(w bench.Workload) int64 { return int64(w.Keys) }

func keepFirst(opts ...dedup.Option) func(beam.Scope, beam.PCollection) beam.PCollection {
	return func(s beam.Scope, rows beam.PCollection) beam.PCollection {
		return dedup.KeepFirst(s, rows, append([]dedup.Option{rowspec.PartitionBy("key")}, opts...)...).Rows
	}
}

// keepLast is KeepLast by key with a changelog output (-U/+U pairs) in
// the op column, unless opts ask for Upsert.
func keepLast(opts ...dedup.Option) func(beam.Scope, beam.PCollection) beam.PCollection {
	return func(s beam.Scope, rows beam.PCollection) beam.PCollection {
		return dedup.KeepLast(s, rows, append([]dedup.Option{rowspec.PartitionBy("key")}, opts...)...).Rows
	}
}

// The stateful KeepLast cases' output when every row reaches the state:
// the workload's rows of a key all differ, so every repeat is an update.
// Prism hands a key's rows to the step in event-time order
// (notes/beam-defects.md 4), so with OnTime none is out of order and
// lastChangelog is also the OnTime case's output.
func lastChangelog(w bench.Workload) int64 { return bench.KeepLast(w.ByEventTime(), false).Changelog() }
func lastUpsert(w bench.Workload) int64    { return bench.KeepLast(w.ByEventTime(), false).Upsert() }

// ttl is long enough that no key expires within a benchmark, and its
// refresh threshold (TTL/100 = 36 s) is rarely crossed.
const ttl = time.Hour

// The floors come first: the other cases report their ratio to them. b is
// the value-state floor (a read and a write of a value state of bytes: four
// requests per row), b0 the protocol's floor (a read, and an append of a
// bool for a new key: two requests per new key, one per duplicate, each
// waited for), bz the runner's ceiling for a stateful step (the same keyed
// stateful DoFn making no request).
var (
	floorCase         = floor("b_floor_stateful_identity", func() any { return bench.NewFloorFn() })
	protocolFloorCase = floor("b0_protocol_floor", func() any { return bench.NewProtocolFloorFn() })
	ceilingCase       = floor("bz_stateful_no_requests", func() any { return bench.NewNoRequestFn() })
)

// floor is a floor case: rows keyed by their key column, then the stateful
// DoFn newFn makes.
func floor(name string, newFn func() any) pipelineCase {
	return pipelineCase{
		name: name,
		build: func(s beam.Scope, rows beam.PCollection) beam.PCollection {
			keyed := beam.ParDo(s.Scope("Key"), bench.KeyOf, rows)
			return beam.ParDo(s.Scope("Floor"), newFn(), keyed)
		},
		out:      allRows,
		stateful: true,
	}
}

// keepFirstCase is (c), KeepFirst watermarkless on the stateful expansion.
var keepFirstCase = pipelineCase{name: "c_keepfirst_stateful", build: keepFirst(dedup.AsStream()), out: allKeys, dedup: true, stateful: true}

// distinctCase (g) is filter.Distinct of the key column: the bounded
// cases also report their ratio to it.
var distinctCase = pipelineCase{name: "g_filter_distinct_keys", build: func(s beam.Scope, rows beam.PCollection) beam.PCollection {
	return filter.Distinct(s, beam.ParDo(s, bench.KeyColumn, rows))
}, out: allKeys}

// terminal is c with the stateful step fused with the sink into a stage
// that has no data output and no timer: Prism's progress loop then spins on
// an already-closed channel for the whole bundle (notes/performance.md).
func terminal(c pipelineCase) pipelineCase {
	c.name += "_terminal"
	c.terminal = true
	return c
}

var gridCases = []pipelineCase{
	floorCase,
	protocolFloorCase,
	ceilingCase,
	{name: "a_stateless_fused", build: func(s beam.Scope, rows beam.PCollection) beam.PCollection {
		return beam.ParDo(s, bench.PassThrough, rows)
	}, out: allRows},
	{name: "a2_stateless_after_reshuffle", build: func(s beam.Scope, rows beam.PCollection) beam.PCollection {
		return beam.ParDo(s, bench.PassThrough, beam.Reshuffle(s, rows))
	}, out: allRows},
	keepFirstCase,
	// The stateful step alone: what c costs when bundles are small (a
	// streaming source) and the pre-filter finds no duplicates to drop.
	{name: "c0_keepfirst_stateful_no_minibatch", build: keepFirst(dedup.AsStream(), dedup.MiniBatch(false)), out: allKeys, dedup: true, stateful: true},
	{name: "d_keepfirst_stateful_ttl_refresh", build: keepFirst(dedup.AsStream(), dedup.StateTTL(ttl), dedup.ResetTTLOnDuplicate(true)), out: allKeys, dedup: true, stateful: true},
	{name: "e_keepfirst_stateful_eventtime", build: keepFirst(dedup.AsStream(), rowspec.OnTime("ts")), out: allKeys, dedup: true, stateful: true},
	{name: "f_keepfirst_stateful_changelog", build: keepFirst(dedup.AsStream(), rowspec.KindColumn("op")), out: allKeys, dedup: true, stateful: true},
	distinctCase,
	// KeepFirst's own choice of expansion on bounded input.
	{name: "h_keepfirst_bounded", build: keepFirst(), out: allKeys, dedup: true, vsDistinct: true},
	{name: "i_keepfirst_bounded_eventtime", build: keepFirst(rowspec.OnTime("ts")), out: allKeys, dedup: true, vsDistinct: true},
	// Window deduplication over fixed windows (a combine per key and window),
	// and what windowing alone costs: the rows windowed, then a GroupByKey
	// per key and window with an identity step (no transform of ours).
	{name: "a3_windowed_gbk_identity", build: func(s beam.Scope, rows beam.PCollection) beam.PCollection {
		w := beam.WindowInto(s, window.NewFixedWindows(windowSize), rows)
		return beam.ParDo(s, bench.FirstOfGroup, beam.GroupByKey(s, beam.ParDo(s, bench.KeyOf, w)))
	}, out: keyWindows},
	{name: "j_windowfirst_fixed_1m", build: windowDedup(dedup.WindowFirst), out: keyWindows, dedup: true},
	{name: "k_windowlast_fixed_1m", build: windowDedup(dedup.WindowLast), out: keyWindows, dedup: true},
	// KeepLast: l–n on the stateful expansion (as c, c0, e), o on bounded
	// input against g. A changelog emits +I per key and a -U/+U pair per
	// later row of the key.
	{name: "l_keeplast_stateful", build: keepLast(dedup.AsStream(), rowspec.KindColumn("op")), out: lastChangelog, dedup: true, stateful: true, insertOnly: true, last: true, folds: true},
	{name: "l0_keeplast_stateful_no_minibatch", build: keepLast(dedup.AsStream(), rowspec.KindColumn("op"), dedup.MiniBatch(false)), out: lastChangelog, dedup: true, stateful: true, insertOnly: true, last: true},
	{name: "m_keeplast_stateful_upsert", build: keepLast(dedup.AsStream(), rowspec.Upsert()), out: lastUpsert, dedup: true, stateful: true, last: true, folds: true},
	{name: "n_keeplast_stateful_eventtime", build: keepLast(dedup.AsStream(), rowspec.OnTime("ts"), rowspec.KindColumn("op")), out: lastChangelog, dedup: true, stateful: true, insertOnly: true, last: true, folds: true},
	{name: "o_keeplast_bounded", build: keepLast(rowspec.KindColumn("op")), out: allKeys, dedup: true, insertOnly: true, last: true, vsDistinct: true},
	{name: "o2_keeplast_bounded_eventtime", build: keepLast(rowspec.OnTime("ts"), rowspec.KindColumn("op")), out: allKeys, dedup: true, insertOnly: true, last: true, vsDistinct: true},
}

// windowSize is the fixed window of the window-dedup cases: the 100 K-row
// workload spans about 110 s of event time, so a key's rows fall in one to
// three windows.
const windowSize = time.Minute

func windowDedup(dd func(beam.Scope, beam.PCollection, ...dedup.Option) dedup.Result) func(beam.Scope, beam.PCollection) beam.PCollection {
	return func(s beam.Scope, rows beam.PCollection) beam.PCollection {
		return dd(s, beam.WindowInto(s, window.NewFixedWindows(windowSize), rows), rowspec.PartitionBy("key")).Rows
	}
}

func keyWindows(w bench.Workload) int64 { return w.KeyWindows(windowSize) }

// gridWorkloads are the workloads of BenchmarkPipelines for n rows. The
// duplicate share and the number of distinct keys are tied (keys = rows ×
// (1 − share)): 0%, 50% and 90% duplicates, plus 1K keys.
func gridWorkloads(n int) []bench.Workload {
	var ws []bench.Workload
	seen := map[int]bool{}
	for _, keys := range []int{n, n / 2, n / 10, 1000} {
		if keys < 1 || keys > n || seen[keys] {
			continue
		}
		seen[keys] = true
		ws = append(ws, bench.Workload{Rows: n, Keys: keys, Seed: 42})
	}
	return ws
}

func workloadName(w bench.Workload) string {
	return fmt.Sprintf("rows=%d/keys=%d/dup=%.0f%%", w.Rows, w.Keys, 100*w.DupShare())
}

// floorRate, protocolRate, ceilingRate and distinctRate hold the floors',
// the ceiling's and g's rows/s per workload of this run.
var floorRate, protocolRate, ceilingRate, distinctRate = map[string]float64{}, map[string]float64{}, map[string]float64{}, map[string]float64{}

// BenchmarkPipelines is the grid: every case on every workload, the floor
// first. Rows default to 100,000 (BEAMDEDUP_BENCH_ROWS).
func BenchmarkPipelines(b *testing.B) {
	n := envInt("BEAMDEDUP_BENCH_ROWS", defaultRows)
	for _, w := range gridWorkloads(n) {
		b.Run(workloadName(w), func(b *testing.B) {
			for _, c := range gridCases {
				b.Run(c.name, func(b *testing.B) { benchCase(b, w, c) })
			}
		})
	}
}

// defaultRows keeps the default grid within about ten minutes on two
// shared cores.
const defaultRows = 100_000

// BenchmarkScaling is time per row of the floor and of stateful KeepFirst
// at 10K and 100K rows (and 1M with BEAMDEDUP_BENCH_LARGE=1), 90%
// duplicates.
func BenchmarkScaling(b *testing.B) {
	sizes := []int{10_000, 100_000}
	if envInt("BEAMDEDUP_BENCH_LARGE", 0) > 0 {
		sizes = append(sizes, 1_000_000)
	}
	for _, n := range sizes {
		w := bench.Workload{Rows: n, Keys: n / 10, Seed: 42}
		b.Run(workloadName(w), func(b *testing.B) {
			for _, c := range []pipelineCase{floorCase, keepFirstCase} {
				b.Run(c.name, func(b *testing.B) { benchCase(b, w, c) })
			}
		})
	}
}

// BenchmarkTerminalStage shows the Prism defect that made stateful steps
// look 10-100x slower than they are: when the stateful DoFn is fused with
// the sink, its stage has no data output and (without timers) nothing for
// Prism's progress loop to wait on, and the loop spins on a closed channel
// until the bundle ends, taking a core from the SDK harness. The grid puts
// a Reshuffle before every sink to measure the steps, not the spin. Small
// inputs only (BEAMDEDUP_BENCH_TERMINAL_ROWS, default 2,000): 10,000 rows
// took 441 s once.
func BenchmarkTerminalStage(b *testing.B) {
	n := envInt("BEAMDEDUP_BENCH_TERMINAL_ROWS", 2000)
	for _, w := range []bench.Workload{{Rows: n, Keys: n, Seed: 42}, {Rows: n, Keys: n / 10, Seed: 42}} {
		b.Run(workloadName(w), func(b *testing.B) {
			for _, c := range []pipelineCase{floorCase, terminal(floorCase), keepFirstCase, terminal(keepFirstCase)} {
				b.Run(c.name, func(b *testing.B) { benchCase(b, w, c) })
			}
		})
	}
}

func benchCase(b *testing.B, w bench.Workload, c pipelineCase) {
	var total time.Duration
	var counters dedup.Counters // KeepFirst's and window dedup's
	var last dedup.LastCounters // KeepLast's
	var peak float64
	var requests int64 // Fn API state requests, all steps
	var flight bench.Flights
	var cpu time.Duration // the process's: Prism's, the harness's and the test's
	w.InsertOnly = c.insertOnly
	for i := 0; i < b.N; i++ {
		p, s := beam.NewPipelineWithRoot()
		rows := bench.Generate(s, w)
		if err := build(s, rows, c); err != nil {
			b.Skipf("not measured: constructing the pipeline failed: %v", err)
		}
		rsstest.ResetPeak()
		bench.ResetStateRequests()
		cpu0 := rsstest.CPUTime()
		pr, d := runOnPrism(b, p, 45*time.Minute)
		cpu += rsstest.CPUTime() - cpu0
		peak = max(peak, rsstest.PeakMB())
		total += d
		for _, r := range bench.AllStateRequests() {
			requests += r.Total()
		}
		flight = bench.StateFlights()
		counters, last = dedup.ReadCounters(pr), dedup.ReadLastCounters(pr)
		checkOut(b, w, c, bench.OutCount(pr), last)
	}
	perRow := total.Seconds() / float64(b.N*w.Rows)
	rate := 1 / perRow
	b.ReportMetric(rate, "rows/s")
	b.ReportMetric(perRow*1e6, "µs/row")
	if cpu > 0 {
		// CPU per row (runner and SDK together), steadier than wall time
		// on a shared machine: what sizing a job starts from.
		b.ReportMetric(cpu.Seconds()*1e6/float64(b.N*w.Rows), "cpu_µs/row")
	}
	b.ReportMetric(float64(requests)/float64(b.N*w.Rows), "requests/row")
	b.ReportMetric(load1(), "load1")
	if flight.Bundles > 0 {
		// How the step's requests went: over how many bundles, and how
		// many were in flight at once (1: each waited for in turn).
		b.ReportMetric(float64(flight.Bundles), "state_bundles")
		b.ReportMetric(float64(flight.MaxInFlight), "max_in_flight")
	}
	if peak > 0 {
		b.ReportMetric(peak, "peakRSS_MB")
	}
	key := workloadName(w)
	if c.name == floorCase.name {
		floorRate[key] = rate
		b.ReportMetric(1, "x_floor")
	} else if f, ok := floorRate[key]; ok {
		b.ReportMetric(rate/f, "x_floor")
	}
	if c.name == protocolFloorCase.name {
		protocolRate[key] = rate
	} else if f, ok := protocolRate[key]; ok {
		b.ReportMetric(rate/f, "x_protocol")
	}
	if c.name == ceilingCase.name {
		ceilingRate[key] = rate
	} else if z, ok := ceilingRate[key]; ok && c.stateful {
		b.ReportMetric(rate/z, "x_ceiling")
	}
	if c.name == distinctCase.name {
		distinctRate[key] = rate
	} else if g, ok := distinctRate[key]; ok && c.vsDistinct {
		b.ReportMetric(rate/g, "x_distinct")
	}
	if c.dedup {
		rows, cost := float64(counters.RowsIn), counters.Cost
		if c.last {
			rows, cost = float64(last.RowsIn), last.Cost
		}
		if rows == 0 {
			rows = float64(w.Rows) // an expansion without the keying counter
		}
		b.ReportMetric(float64(cost.StateReads)/rows, "reads/row")
		b.ReportMetric(float64(cost.StateWrites)/rows, "writes/row")
		b.ReportMetric(float64(cost.TimerSets)/rows, "timers/row")
	}
	if c.last {
		b.ReportMetric(float64(last.Updates)/float64(w.Rows), "updates/row")
		b.ReportMetric(float64(last.Emitted())/float64(w.Rows), "out/row")
	}
}

// checkOut checks a run's output row count: c.out(w) exactly, or, for a
// case whose fold merged rows before the state (counted as superseded or
// minibatch_dropped), between one row per key and c.out(w).
// A KeepLast's output must also be what its counters say it emitted.
func checkOut(b *testing.B, w bench.Workload, c pipelineCase, out int64, counters dedup.LastCounters) {
	if c.folds && counters.Superseded+counters.MiniBatchDropped > 0 {
		require.GreaterOrEqual(b, out, int64(w.Keys), "output rows: at least +I per key")
		require.LessOrEqual(b, out, c.out(w), "output rows: at most one change per row")
	} else { // no row merged away before the state
		require.Equal(b, c.out(w), out, "output rows")
	}
	if c.last {
		require.Equal(b, out, counters.Emitted(), "output rows == emitted by the counters")
		require.Equal(b, int64(w.Keys), counters.Inserts, "+I once per key")
		require.Zero(b, counters.Unaccounted(), "every row in one outcome")
	}
}

// build adds the case and its sink. A panic during construction (a
// transform under development) skips the case instead of ending the run.
func build(s beam.Scope, rows beam.PCollection, c pipelineCase) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	out := c.build(s.Scope(c.name), rows)
	if !c.terminal {
		out = beam.Reshuffle(s.Scope("Shuffle"), out)
	}
	bench.Sink(s, out)
	return nil
}

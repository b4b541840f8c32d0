// Package bench holds the pipeline benchmarks of dedup.KeepFirst and
// dedup.KeepLast on Prism, side by side with the runner's floor (a bare
// keyed stateful identity DoFn), and the state-access budget tests that run
// in CI.
//
// Everything runs on input generated inside the pipeline (Impulse and a
// seeded generator DoFn), so reading input is not measured and every case
// of one run sees the same rows.
//
// The benchmarks only run with -bench; the full grid is
//
//	go test -bench=. -run=^$ -benchtime=1x -timeout=60m ./testing/bench/
//
// BEAMDEDUP_BENCH_ROWS sets the row count of the grid and
// BEAMDEDUP_BENCH_LARGE=1 adds the 1M-row point to the scaling benchmark.
// The results and how to read them are in notes/performance.md.
package bench

// BaseTime is the event time of the first generated row (2024-01-01 UTC).
const BaseTime int64 = 1704067200000

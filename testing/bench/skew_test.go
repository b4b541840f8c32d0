package bench_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/beamdedup/beamdedup/testing/bench"
)

// skewCost is the per-row and per-request CPU the grid measured on Prism
// (docs/scaling.md): the bz ceiling's cpu_µs/row, 14, and c0's (55) less
// bz's over its 2 requests per row, 20.
var skewCost = bench.SkewCost{RowMicros: 14, RequestMicros: 20}

// skewKeys are the key streams the simulation runs: rows rows each.
func skewKeys(rows int) map[string][]string {
	r := rand.New(rand.NewPCG(3, 4))
	out := map[string][]string{}
	add := func(name string, key func(i int) string) {
		for i := range rows {
			out[name] = append(out[name], key(i))
		}
	}
	add("uniform, all new (0% duplicates)", func(i int) string { return fmt.Sprint("user-", i) })
	add("uniform over rows/10 keys (90%)", func(int) string { return fmt.Sprint("user-", r.IntN(rows/10)) })
	zipf := rand.NewZipf(r, 1.1, 1, uint64(rows/2))
	add("Zipf s=1.1 over rows/2 keys", func(int) string { return fmt.Sprint("user-", zipf.Uint64()) })
	var bids []string
	bench.NexmarkBids(rows*50/46+50, 1, func(b bench.Bid) { bids = append(bids, fmt.Sprint(b.Bidder, "/", b.Auction)) })
	add("Nexmark q18 (bidder, auction)", func(i int) string { return bids[i] })
	add("one key (no PartitionBy)", func(int) string { return "" })
	return out
}

// TestSkew_WhatAHotKeyDoesToParallelism simulates a stateful dedup step on
// 1 to 64 workers (bench.SimulateSkew) over uniform, Zipf, Nexmark q18's
// and a single key, in windows of 10,000 rows (a second at 10 K rows/s),
// and logs the effective parallelism for docs/scaling.md. It holds what
// the page says: uniform keys use every worker (Flink's key groups within
// 15% at 16); one key runs on one worker whatever their number; a Zipf key
// holding a seventh of the rows caps a step near 7 workers, and
// Nexmark's hot (bidder, auction) pairs, which move every ~1,500 bids, cap
// q18 at about a quarter of 64; the fold, which makes a key's rows of a
// bundle one version, is what spreads a hot key's work.
//
//	go test -run TestSkew -v ./testing/bench/
func TestSkew_WhatAHotKeyDoesToParallelism(t *testing.T) {
	const rows, window = 100_000, 10_000
	keys := skewKeys(rows)
	steps := []struct {
		name string
		step bench.SkewStep
	}{
		{"KeepFirst (c0)", bench.SkewStep{Bundle: 1000}},
		{"KeepLast, no fold (l0)", bench.SkewStep{Last: true, Bundle: 1000}},
		{"KeepLast, fold (l)", bench.SkewStep{Last: true, Fold: true, Bundle: 1000}},
	}
	var table strings.Builder
	fmt.Fprintf(&table, "\n| keys | step | requests/row | hottest key's rows | 4 workers | 16 | 64 |\n| --- | --- | ---: | ---: | ---: | ---: | ---: |\n")
	results := map[string]map[int]bench.SkewResult{}
	for _, name := range []string{"uniform, all new (0% duplicates)", "uniform over rows/10 keys (90%)", "Zipf s=1.1 over rows/2 keys", "Nexmark q18 (bidder, auction)", "one key (no PartitionBy)"} {
		for _, st := range steps {
			id := name + "/" + st.name
			results[id] = map[int]bench.SkewResult{}
			var cells []string
			var hot, reqs float64
			for _, workers := range []int{1, 4, 16, 64} {
				r := bench.SimulateSkew(keys[name], workers, st.step, skewCost, window)
				results[id][workers] = r
				hot, reqs = r.HotRowShare, r.RequestsPerRow
				if workers > 1 {
					cells = append(cells, fmt.Sprintf("%.1f / %.1f", r.KeyGroups, r.Balanced))
				}
			}
			fmt.Fprintf(&table, "| %s | %s | %.2f | %.1f%% | %s |\n", name, st.name, reqs, 100*hot, strings.Join(cells, " | "))
		}
	}
	t.Logf("effective parallelism, Flink's key groups / ranges balanced perfectly (Dataflow's best case):%s", table.String())

	for _, st := range steps {
		u := results["uniform, all new (0% duplicates)/"+st.name]
		assert.InDelta(t, 1, u[1].KeyGroups, 1e-9, "one worker")
		assert.Greater(t, u[16].KeyGroups, 16*0.85, "%s: uniform keys use every worker", st.name)
		assert.InDelta(t, 64, u[64].Balanced, 0.5, "%s: uniform keys balance", st.name)
		one := results["one key (no PartitionBy)/"+st.name]
		assert.InDelta(t, 1, one[64].KeyGroups, 1e-9, "%s: one key runs on one worker", st.name)
		assert.InDelta(t, 1, one[64].Balanced, 1e-9, "%s: and cannot be rebalanced", st.name)
	}
	zipf := results["Zipf s=1.1 over rows/2 keys/KeepLast, no fold (l0)"]
	assert.Less(t, zipf[64].Balanced, 10.0, "a Zipf key with a seventh of the rows caps the job near 7 workers")
	assert.Greater(t, results["Zipf s=1.1 over rows/2 keys/KeepLast, fold (l)"][64].Balanced, 3*zipf[64].Balanced, "the fold spreads a hot key's work")
	q18 := results["Nexmark q18 (bidder, auction)/KeepLast, no fold (l0)"]
	assert.Less(t, q18[64].HotRowShare, 0.1, "Nexmark's hot pair moves every ~1,500 bids: a few percent of a window's")
	assert.Less(t, q18[64].Balanced, 32.0, "without the fold, q18 runs at most half of 64 workers wide")
	folded := results["Nexmark q18 (bidder, auction)/KeepLast, fold (l)"]
	assert.Greater(t, folded[64].Balanced, 2*q18[64].Balanced, "the fold spreads the hot pairs' work")
}

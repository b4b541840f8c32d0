package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseLine_ReadsTheCaseItsWorkloadAndEveryMetric(t *testing.T) {
	k, r, ok := parseLine("BenchmarkPipelines/rows=20000/keys=20000/dup=0%/c0_keepfirst_stateful_no_minibatch-2   1  759917943 ns/op  51.43 cpu_µs/row  2.000 requests/row  26318 rows/s  2.209 x_protocol")
	require.True(t, ok)
	assert.Equal(t, key{"rows=20000/keys=20000/dup=0%", "c0_keepfirst_stateful_no_minibatch"}, k)
	assert.Equal(t, result{"ns/op": 759917943, "cpu_µs/row": 51.43, "requests/row": 2, "rows/s": 26318, "x_protocol": 2.209}, r)

	k, r, ok = parseLine("BenchmarkNexmark/q18_keeplast_stateful-2  1  2481000000 ns/op  80596 events/s  0.8670 requests/event  0.4542 x_q0")
	require.True(t, ok)
	assert.Equal(t, key{"nexmark", "q18_keeplast_stateful"}, k)
	assert.Equal(t, 0.4542, r["x_q0"])

	for _, l := range []string{"--- BENCH: BenchmarkPipelines/rows=20000", "PASS", "BenchmarkPipelines/x-2 1 5 ns/op"} {
		_, _, ok := parseLine(l)
		assert.False(t, ok, l)
	}
}

// The tables: medians of the runs, ratios within a run, against the code
// before the median of the per-run ratios, and the targets' verdicts.
func TestRenderDir_MediansRatiosAndTargets(t *testing.T) {
	dir := t.TempDir()
	const wl = "BenchmarkPipelines/rows=100/keys=100/dup=0%/"
	write := func(name string, lines ...string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("start 2026-12-01T13:00:00Z load 1.00 1.00 1.00\n"+strings.Join(lines, "\n")+"\nend 2026-12-01T13:01:00Z load 1.50 1.10 1.00\n"), 0o600))
	}
	for i, r := range []struct{ b0, c0, x, d, q string }{{"10000", "25000", "2.5", "9000", "0.30"}, {"12000", "21600", "1.8", "12000", "0.10"}, {"9000", "20700", "2.3", "8000", "0.25"}} {
		n := string(rune('1' + i))
		write("after-"+n+"-grid.txt",
			wl+"b0_protocol_floor-2 1 1 ns/op "+r.b0+" rows/s 2 requests/row",
			wl+"c0_keepfirst_stateful_no_minibatch-2 1 1 ns/op "+r.c0+" rows/s 2 requests/row "+r.x+" x_protocol",
			wl+"d_keepfirst_stateful_ttl_refresh-2 1 1 ns/op "+r.d+" rows/s 2 requests/row")
		write("before-"+n+"-grid.txt", wl+"d_keepfirst_stateful_ttl_refresh-2 1 1 ns/op 4000 rows/s 2 requests/row")
		write("after-"+n+"-nexmark.txt", "BenchmarkNexmark/q0_passthrough-2 1 1 ns/op 100000 events/s 0 requests/event",
			"BenchmarkNexmark/q18_keeplast_stateful-2 1 1 ns/op 25000 events/s 0.867 requests/event "+r.q+" x_q0")
	}
	var out strings.Builder
	require.NoError(t, renderDir(&out, dir))
	s := out.String()
	t.Log(s)
	assert.Contains(t, s, "| c0_keepfirst_stateful_no_minibatch | 21.6 K, 2.30× b0 | 2 |")
	assert.Contains(t, s, "4.0 K → 9.0 K: 2.25× (2.25, 3.00, 2.00)")
	assert.Contains(t, s, "- c0 ÷ b0, rows=100/keys=100/dup=0%: 2.30× (runs 2.50, 1.80, 2.30; target ≥ 2): met")
	assert.Contains(t, s, "- q18 stateful ÷ q0: 0.25× (runs 0.30, 0.10, 0.25; target ≥ 0.2): met")
	assert.Contains(t, s, "1.50 1.10 1.00")
}

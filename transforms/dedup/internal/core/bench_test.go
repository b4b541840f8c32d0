package core_test

import (
	"testing"

	"github.com/beamdedup/beamdedup/testing/rsstest"
	"github.com/beamdedup/beamdedup/transforms/dedup/internal/core"
	"github.com/beamdedup/beamdedup/transforms/rowkind"
)

// Benchmarks of OnRow, one row per iteration, over one key's State as the
// adapter holds it (decoding and encoding the state is statecoder's cost,
// benchmarked there). Targets: <= 100 ns/row, 0 allocs/row.

var sinkDecision core.Decision

// benchRows runs next(i, st) once per iteration, resetting the state to a
// fresh key every period rows, and reports ns/row (wall time) and
// cpu-ns/row (process CPU time, steadier on a loaded machine).
func benchRows(b *testing.B, period int, next func(i int, st *core.State) core.Decision) {
	b.ReportAllocs()
	var st core.State
	i := 0
	cpu0 := rsstest.CPUTime()
	for b.Loop() {
		if i%period == 0 {
			st = core.State{}
		}
		sinkDecision = next(i%period, &st)
		i++
	}
	cpu := rsstest.CPUTime() - cpu0
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/row")
	if cpu > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/row")
	}
}

// A first row (emitted) followed by 15 duplicates, no TTL.
func BenchmarkOnRow_WatermarklessFirstRowAndDuplicates(b *testing.B) {
	cfg := core.Config{ResetOnDuplicate: true}
	now := at(10, 0)
	benchRows(b, 16, func(i int, st *core.State) core.Decision {
		return core.First{Config: cfg}.OnRow(st, core.Row{Kind: rowkind.Insert, Time: now}, now+int64(i))
	})
}

// StateTTL 5 min with refresh on duplicates a second apart: the refresh
// granularity TTL/RefreshFraction is 3 s, so every third refresh is
// written; one row in 32 arrives after expiry and starts a new period.
func BenchmarkOnRow_WatermarklessStateTTLRefresh(b *testing.B) {
	cfg := core.Config{StateTTL: 5 * minute, ResetOnDuplicate: true, CleanupTimers: true}
	now := at(10, 0)
	benchRows(b, 1<<30, func(i int, st *core.State) core.Decision {
		step := second
		if i%32 == 31 {
			step = 6 * minute // an expiry
		}
		now += step
		return core.First{Config: cfg}.OnRow(st, core.Row{Kind: rowkind.Insert, Time: now}, now)
	})
}

// Event-time mode: a candidate, replacements by earlier rows, later rows
// dropped, then the key finalized (OnTimer, not counted as a row) and late
// rows dropped.
func BenchmarkOnRow_EventTimeCandidateReplacementsAndLate(b *testing.B) {
	cfg := core.Config{EventTime: true, StateTTL: 5 * minute, ResetOnDuplicate: true, CleanupTimers: true}
	e, now := at(10, 0), at(12, 0)
	cand := []byte("candidate row")
	benchRows(b, 16, func(i int, st *core.State) core.Decision {
		switch {
		case i < 8: // pending: alternately earlier (replace) and later (drop)
			et := e - int64(i)*second
			if i%2 == 1 {
				et = e + int64(i)*second
			}
			d := core.First{Config: cfg}.OnRow(st, core.Row{Kind: rowkind.Insert, Time: et}, now)
			if d.Outcome == core.BecomeCandidate || d.Outcome == core.ReplaceCandidate {
				st.Cand = cand
			}
			if i == 7 {
				cfg.OnTimer(st, true, st.CandTime, now, globalWindowEnd)
			}
			return d
		default: // emitted: late rows
			return core.First{Config: cfg}.OnRow(st, core.Row{Kind: rowkind.Insert, Time: e - int64(i)*second}, now)
		}
	})
}

// Changelog: an unseen -D, the first +I, then a mix of +I, -U, +U, -D.
func BenchmarkOnRow_ChangelogMixOfKinds(b *testing.B) {
	cfg := core.Config{ResetOnDuplicate: true}
	kinds := [...]rowkind.Kind{rowkind.Delete, rowkind.Insert, rowkind.Insert, rowkind.UpdateBefore, rowkind.UpdateAfter, rowkind.Delete, rowkind.UpdateBefore, rowkind.UpdateAfter}
	now := at(10, 0)
	benchRows(b, len(kinds), func(i int, st *core.State) core.Decision {
		return core.First{Config: cfg}.OnRow(st, core.Row{Kind: kinds[i], Time: now}, now)
	})
}

// Package deduptest holds what tests and benchmarks of pipelines built on
// beamdedup's dedup transforms need and a pipeline in production does not:
// a test clock, the state requests waited for one at a time, and views of
// the counters. It is a test helper (testing/depstest keeps it out of
// every program and library package).
package deduptest

import (
	"time"

	"github.com/beamdedup/beamdedup/internal/testhook"
	"github.com/beamdedup/beamdedup/transforms/dedup"
)

// UseClock reads a dedup transform's processing time from the clock
// registered under name with RegisterClock, instead of the wall clock.
func UseClock(name string) dedup.Option {
	return testhook.DedupOption(func(h *testhook.Dedup) { h.Clock = name }).(dedup.Option)
}

// RegisterClock registers a processing-time clock for UseClock. The clock
// is given the event time of the row being processed; a test clock may
// return it, so that a row's timestamp doubles as its arrival time and
// expiry becomes deterministic on any runner. A clock exists only in the
// process that registered it: it works with in-process (loopback) workers.
func RegisterClock(name string, now func(eventTime time.Time) time.Time) {
	testhook.RegisterClock(name, now)
}

// OverlapState sets whether KeepFirst's and KeepLast's stateful step keeps
// several state requests in flight within a bundle (on, the default) or
// waits for each in turn (docs/state.md): decisions and requests are the
// same either way, for tests and benchmarks that compare the two.
func OverlapState(on bool) dedup.Option {
	return testhook.DedupOption(func(h *testhook.Dedup) { h.WaitEach = !on }).(dedup.Option)
}

// RowCounts returns c without the cost and refresh counters, which depend
// on bundling: what is left is where each row went.
func RowCounts(c dedup.Counters) dedup.Counters {
	c.Cost, c.TTLRefreshes, c.MiniBatchDropped = dedup.Cost{}, 0, 0
	return c
}

// LastRowCounts is RowCounts for KeepLast's counters.
func LastRowCounts(c dedup.LastCounters) dedup.LastCounters {
	c.Cost, c.TTLRefreshes, c.MiniBatchDropped = dedup.Cost{}, 0, 0
	return c
}

// WithoutExpiry returns c without KeysExpired, which also counts state
// dropped at the end of a window or of the input.
func WithoutExpiry(c dedup.Counters) dedup.Counters {
	c.KeysExpired = 0
	return c
}

// StateRequests is the number of Fn API state requests of the stateful
// steps: gets, appends and clears.
func StateRequests(c dedup.Cost) int64 { return c.StateGets + c.StateAppends + c.StateClears }

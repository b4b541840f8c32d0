package core_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/transforms/dedup/internal/core"
	"github.com/beamdedup/beamdedup/transforms/rowkind"
)

// The rules of KeepFirst (docs/keepfirst.md, "Semantics") where the spec is silent,
// one by one, through the core and the runner model.

// emitWatermarkless returns a sim in which key "k" was emitted at
// processing time t0 with event time et.
func emitWatermarkless(t *testing.T, cfg core.Config, t0, et int64) *sim {
	t.Helper()
	s := newSim(t, cfg, t0)
	require.Equal(t, core.Emit, s.Arrive("k", rowkind.Insert, et, "first").Outcome)
	return s
}

// emitEventTime returns a sim in which key "k" had a candidate with event
// time et arrive at processing time t0 and finalized at processing time
// emitAt (the watermark reached et then).
func emitEventTime(t *testing.T, cfg core.Config, t0, et, emitAt int64) *sim {
	t.Helper()
	s := newSim(t, cfg, t0)
	s.AdvanceWatermark(et - minute)
	require.Equal(t, core.BecomeCandidate, s.Arrive("k", rowkind.Insert, et, "first").Outcome)
	s.AdvanceClock(emitAt)
	s.AdvanceWatermark(et)
	require.Equal(t, []string{"first"}, s.Rows())
	require.Equal(t, emitAt, s.Out()[0].ProcTime)
	return s
}

func TestRule_TiesInEventTimeKeepTheFirstArrival(t *testing.T) {
	type row struct {
		et   int64
		id   string
		want core.Outcome
	}
	for _, tc := range []struct {
		name string
		rows []row
		want string
	}{
		{"two rows at the same time", []row{
			{at(10, 1), "a", core.BecomeCandidate}, {at(10, 1), "b", core.DropDuplicate},
		}, "a"},
		{"a tie with the replacing candidate", []row{
			{at(10, 2), "a", core.BecomeCandidate}, {at(10, 1), "b", core.ReplaceCandidate}, {at(10, 1), "c", core.DropDuplicate},
		}, "b"},
		{"a tie after a later row", []row{
			{at(10, 1), "a", core.BecomeCandidate}, {at(10, 3), "b", core.DropDuplicate}, {at(10, 1), "c", core.DropDuplicate},
		}, "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(t, core.Config{EventTime: true, ResetOnDuplicate: true, CleanupTimers: true}, at(12, 0))
			for i, r := range tc.rows {
				s.AdvanceClock(at(12, 0) + int64(i)*second)
				assert.Equal(t, r.want, s.Arrive("k", rowkind.Insert, r.et, r.id).Outcome, "row %s", r.id)
			}
			s.AdvanceWatermark(at(11, 0))
			assert.Equal(t, []string{tc.want}, s.Rows())
		})
	}
}

func TestRule_StateTTLExpiryIsInclusive(t *testing.T) {
	const ttl = 5 * minute
	t0 := at(10, 0)
	for _, tc := range []struct {
		name    string
		setup   func(t *testing.T, cfg core.Config) *sim // returns a sim whose key "k" was last written at written
		cfg     core.Config
		written int64
		late    core.Outcome // outcome of the row at written+ttl-1ms
		fresh   core.Outcome // outcome of the row at written+ttl
	}{
		{
			name:    "watermarkless, written at emission",
			cfg:     core.Config{StateTTL: ttl},
			setup:   func(t *testing.T, cfg core.Config) *sim { return emitWatermarkless(t, cfg, t0, t0) },
			written: t0, late: core.DropDuplicate, fresh: core.Emit,
		},
		{
			name: "watermarkless, written by a refresh",
			cfg:  core.Config{StateTTL: ttl, ResetOnDuplicate: true},
			setup: func(t *testing.T, cfg core.Config) *sim {
				s := emitWatermarkless(t, cfg, t0, t0)
				s.AdvanceClock(t0 + 2*minute)
				d := s.Arrive("k", rowkind.Insert, t0+2*minute, "dup")
				require.True(t, d.Refreshed && d.Write)
				return s
			},
			written: t0 + 2*minute, late: core.DropDuplicate, fresh: core.Emit,
		},
		{
			name:    "event time, written at emission",
			cfg:     core.Config{EventTime: true, StateTTL: ttl},
			setup:   func(t *testing.T, cfg core.Config) *sim { return emitEventTime(t, cfg, t0-minute, at(9, 0), t0) },
			written: t0, late: core.DropLate, fresh: core.BecomeCandidate,
		},
	} {
		for _, cleanup := range []bool{true, false} {
			cfg := tc.cfg
			cfg.CleanupTimers = cleanup
			t.Run(fmt.Sprintf("%s/cleanup=%v", tc.name, cleanup), func(t *testing.T) {
				t.Run("not expired at t+d-1ms", func(t *testing.T) {
					s := tc.setup(t, cfg)
					s.AdvanceClock(tc.written + ttl - 1)
					d := s.Arrive("k", rowkind.Insert, at(9, 30), "probe")
					assert.Equal(t, tc.late, d.Outcome)
					assert.False(t, d.Expired)
				})
				t.Run("expired at exactly t+d", func(t *testing.T) {
					s := tc.setup(t, cfg)
					s.AdvanceClock(tc.written + ttl)
					timerCleared := cleanup && cfg.Family() == core.ProcessingTimeFamily
					if timerCleared {
						assert.Equal(t, core.None, s.State("k").Phase, "the cleanup timer at t+d cleared the key")
					}
					d := s.Arrive("k", rowkind.Insert, at(9, 30), "probe")
					assert.Equal(t, tc.fresh, d.Outcome)
					if !timerCleared {
						assert.True(t, d.Expired, "expiry detected on arrival")
					}
				})
			})
		}
	}
}

func TestRule_WhatRefreshesStateTTL(t *testing.T) {
	const ttl = 5 * minute
	t0 := at(10, 0)
	for _, tc := range []struct {
		name      string
		eventTime bool
		reset     bool
		kind      rowkind.Kind
		refreshes bool
	}{
		{"+I duplicate with reset", false, true, rowkind.Insert, true},
		{"+U duplicate with reset", false, true, rowkind.UpdateAfter, true},
		{"-U with reset", false, true, rowkind.UpdateBefore, false},
		{"-D with reset", false, true, rowkind.Delete, false},
		{"+I duplicate without reset", false, false, rowkind.Insert, false},
		{"+U duplicate without reset", false, false, rowkind.UpdateAfter, false},
		{"late row in event-time mode with reset", true, true, rowkind.Insert, false},
	} {
		for _, cleanup := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/cleanup=%v", tc.name, cleanup), func(t *testing.T) {
				cfg := core.Config{EventTime: tc.eventTime, StateTTL: ttl, ResetOnDuplicate: tc.reset, CleanupTimers: cleanup}
				var s *sim
				if tc.eventTime {
					s = emitEventTime(t, cfg, t0-minute, at(9, 0), t0)
				} else {
					s = emitWatermarkless(t, cfg, t0, t0)
				}
				// The row under test, 3 minutes after the key was written.
				s.AdvanceClock(t0 + 3*minute)
				d := s.Arrive("k", tc.kind, at(9, 1), "row")
				assert.Equal(t, tc.refreshes, d.Refreshed, "Decision.Refreshed")

				// At the unrefreshed expiry the key survives only if refreshed.
				s.AdvanceClock(t0 + ttl)
				d = s.Arrive("k", rowkind.Insert, at(9, 2), "probe")
				if tc.refreshes {
					assert.Equal(t, core.DropDuplicate, d.Outcome, "refreshed: still within retention at 10:05")
				} else {
					assert.Contains(t, []core.Outcome{core.Emit, core.BecomeCandidate}, d.Outcome, "not refreshed: a new period at 10:05")
				}
			})
		}
	}
}

func TestRule_RowsWhileOnlyAPendingCandidateExistsNeitherExpireNorRefreshIt(t *testing.T) {
	for _, cleanup := range []bool{true, false} {
		t.Run(fmt.Sprintf("cleanup=%v", cleanup), func(t *testing.T) {
			cfg := core.Config{EventTime: true, StateTTL: 5 * minute, ResetOnDuplicate: true, CleanupTimers: cleanup}
			s := newSim(t, cfg, at(10, 0))
			s.AdvanceWatermark(at(8, 0))
			require.Equal(t, core.BecomeCandidate, s.Arrive("k", rowkind.Insert, at(9, 30), "a").Outcome)

			// An hour of processing time with no watermark progress: 12 TTLs.
			for i, tc := range []struct {
				at   int64
				et   int64
				want core.Outcome
			}{
				{at(10, 10), at(9, 40), core.DropDuplicate},
				{at(10, 30), at(9, 20), core.ReplaceCandidate},
				{at(10, 50), at(9, 50), core.DropDuplicate},
				{at(11, 0), at(9, 20), core.DropDuplicate},
			} {
				s.AdvanceClock(tc.at)
				d := s.Arrive("k", rowkind.Insert, tc.et, fmt.Sprintf("r%d", i))
				assert.Equal(t, tc.want, d.Outcome, "row %d", i)
				assert.False(t, d.Expired, "a pending candidate has no TTL (row %d)", i)
				assert.False(t, d.Refreshed, "pending rows never refresh retention (row %d)", i)
				assert.Equal(t, core.Pending, s.State("k").Phase)
			}

			s.AdvanceClock(at(11, 1))
			s.AdvanceWatermark(at(9, 20))
			assert.Equal(t, []emission{{Row: "r1", Key: "k", EventTime: at(9, 20), ProcTime: at(11, 1)}}, s.Out())
			assert.Equal(t, at(11, 6), s.State("k").ExpireAt, "retention counts from the emission, not from any pending row")
		})
	}
}

func TestRule_EventTimeModeRetentionStartsAtEmission(t *testing.T) {
	for _, cleanup := range []bool{true, false} {
		t.Run(fmt.Sprintf("cleanup=%v", cleanup), func(t *testing.T) {
			cfg := core.Config{EventTime: true, StateTTL: 5 * minute, ResetOnDuplicate: true, CleanupTimers: cleanup}
			// Candidate arrives at 10:00, emitted at 10:10.
			s := emitEventTime(t, cfg, at(10, 0), at(9, 0), at(10, 10))
			assert.Equal(t, at(10, 15), s.State("k").ExpireAt)

			s.AdvanceClock(at(10, 15) - 1)
			assert.Equal(t, core.DropLate, s.Arrive("k", rowkind.Insert, at(9, 5), "late").Outcome)
			s.AdvanceClock(at(10, 15))
			d := s.Arrive("k", rowkind.Insert, at(9, 6), "next")
			assert.Equal(t, core.BecomeCandidate, d.Outcome, "a new period at emission + TTL")
			assert.True(t, d.Expired)
		})
	}
}

func TestRule_UnseenRetractionsAreIgnoredAndDoNotMarkTheKey(t *testing.T) {
	for _, retraction := range []rowkind.Kind{rowkind.Delete, rowkind.UpdateBefore} {
		for _, next := range []rowkind.Kind{rowkind.Insert, rowkind.UpdateAfter} {
			t.Run(fmt.Sprintf("kind %d then kind %d", retraction, next), func(t *testing.T) {
				cfg := core.Config{StateTTL: 5 * minute, ResetOnDuplicate: true, CleanupTimers: true}
				var st core.State
				d := core.First{Config: cfg}.OnRow(&st, core.Row{Kind: retraction, Time: at(10, 0)}, at(10, 0))
				assert.Equal(t, core.IgnoreRetraction, d.Outcome)
				assert.False(t, d.Write, "nothing to write")
				assert.Equal(t, core.Timer{}, d.Timer, "no timer")
				assert.Equal(t, core.State{}, st, "the key is not marked")

				d = core.First{Config: cfg}.OnRow(&st, core.Row{Kind: next, Time: at(10, 0)}, at(10, 0))
				assert.Equal(t, core.Emit, d.Outcome, "the next +I/+U is still the first")
			})
		}
	}

	t.Run("after expiry", func(t *testing.T) {
		cfg := core.Config{StateTTL: 5 * minute, ResetOnDuplicate: true}
		s := emitWatermarkless(t, cfg, at(10, 0), at(10, 0))
		s.AdvanceClock(at(10, 5))
		d := s.Arrive("k", rowkind.Delete, at(10, 5), "-D")
		assert.Equal(t, core.IgnoreRetraction, d.Outcome)
		assert.True(t, d.Expired)
		assert.Equal(t, core.None, s.State("k").Phase, "the expired key is cleared, not marked again")
		s.AdvanceClock(at(10, 6))
		assert.Equal(t, core.Emit, s.Arrive("k", rowkind.Insert, at(10, 6), "+I").Outcome)
	})
}

func TestRule_EventTimeTTL(t *testing.T) {
	const d = 1 * 60 * minute
	e := at(10, 0) // event time of the emitted row

	t.Run("a row more than d after the largest event time starts a new period without cleanup", func(t *testing.T) {
		for _, cleanup := range []bool{true, false} {
			t.Run(fmt.Sprintf("cleanup=%v", cleanup), func(t *testing.T) {
				cfg := core.Config{EventTTL: d, CleanupTimers: cleanup}
				s := emitWatermarkless(t, cfg, at(12, 0), e) // the watermark never moves
				assert.Equal(t, core.DropDuplicate, s.Arrive("k", rowkind.Insert, e+d, "at max+d").Outcome)
				dec := s.Arrive("k", rowkind.Insert, e+d+1, "at max+d+1ms")
				assert.Equal(t, core.Emit, dec.Outcome)
				assert.True(t, dec.Expired)
				assert.Equal(t, []string{"first", "at max+d+1ms"}, s.Rows())
			})
		}
	})

	t.Run("duplicates refresh the largest event time only with reset", func(t *testing.T) {
		for _, tc := range []struct {
			reset bool
			kind  rowkind.Kind
			want  core.Outcome // of a row at e+d+1 after a duplicate at e+30m
		}{
			{true, rowkind.Insert, core.DropDuplicate},
			{true, rowkind.UpdateAfter, core.DropDuplicate},
			{true, rowkind.UpdateBefore, core.Emit},
			{true, rowkind.Delete, core.Emit},
			{false, rowkind.Insert, core.Emit},
		} {
			t.Run(fmt.Sprintf("reset=%v kind=%d", tc.reset, tc.kind), func(t *testing.T) {
				s := emitWatermarkless(t, core.Config{EventTTL: d, ResetOnDuplicate: tc.reset}, at(12, 0), e)
				s.Arrive("k", tc.kind, e+30*minute, "dup")
				assert.Equal(t, tc.want, s.Arrive("k", rowkind.Insert, e+d+1, "probe").Outcome)
			})
		}
	})

	t.Run("the cleanup timer at max+d+1 clears the key", func(t *testing.T) {
		s := emitWatermarkless(t, core.Config{EventTTL: d, CleanupTimers: true}, at(12, 0), e)
		timer, ok := s.Timer("k")
		require.True(t, ok)
		assert.Equal(t, core.Timer{Kind: core.Cleanup, At: e + d + 1}, timer)
		s.AdvanceWatermark(e + d)
		assert.Equal(t, core.Emitted, s.State("k").Phase, "watermark at max+d: retained")
		s.AdvanceWatermark(e + d + 1)
		assert.Equal(t, core.None, s.State("k").Phase, "watermark past max+d: cleared")
		assert.Equal(t, core.Emit, s.Arrive("k", rowkind.Insert, e, "again").Outcome, "a new period")
	})

	t.Run("event-time mode", func(t *testing.T) {
		cfg := core.Config{EventTime: true, EventTTL: d, ResetOnDuplicate: true, CleanupTimers: true}
		s := emitEventTime(t, cfg, at(12, 0), e, at(12, 1))
		timer, _ := s.Timer("k")
		assert.Equal(t, core.Timer{Kind: core.Cleanup, At: e + d + 1}, timer)
		assert.Equal(t, core.DropLate, s.Arrive("k", rowkind.Insert, e+d, "at max+d").Outcome)
		dec := s.Arrive("k", rowkind.Insert, e+d+1, "at max+d+1ms")
		assert.Equal(t, core.BecomeCandidate, dec.Outcome)
		assert.True(t, dec.Expired)
	})

	t.Run("combined with StateTTL either expiry ends the period", func(t *testing.T) {
		for _, tc := range []struct {
			name      string
			eventTime bool
			arrive    int64 // processing time of the probe
			et        int64 // its event time
			expired   bool
		}{
			{"neither expired", false, at(12, 4), e + d, false},
			{"processing-time expiry first", false, at(12, 5), e + minute, true},
			{"event-time expiry first", false, at(12, 1), e + d + 1, true},
			{"event time: neither expired", true, at(12, 5), e + d, false},
			{"event time: processing-time expiry first", true, at(12, 6), e + minute, true},
			{"event time: event-time expiry first", true, at(12, 2), e + d + 1, true},
		} {
			for _, cleanup := range []bool{true, false} {
				t.Run(fmt.Sprintf("%s/cleanup=%v", tc.name, cleanup), func(t *testing.T) {
					cfg := core.Config{EventTime: tc.eventTime, StateTTL: 5 * minute, EventTTL: d, CleanupTimers: cleanup}
					var s *sim
					if tc.eventTime {
						s = emitEventTime(t, cfg, at(12, 0), e, at(12, 1)) // retained until 12:06
					} else {
						s = emitWatermarkless(t, cfg, at(12, 0), e) // retained until 12:05
					}
					s.AdvanceClock(tc.arrive)
					dec := s.Arrive("k", rowkind.Insert, tc.et, "probe")
					assert.Equal(t, tc.expired, dec.Expired)
					assert.Equal(t, tc.expired, dec.Outcome == core.Emit || dec.Outcome == core.BecomeCandidate, "outcome %v", dec.Outcome)
				})
			}
		}
	})
}

func TestRule_RefreshThrottling(t *testing.T) {
	const ttl = 100 * second // throttling granularity TTL/RefreshFraction = 1s
	require.Equal(t, int64(100), int64(core.RefreshFraction))
	t0 := at(10, 0)

	t.Run("StateTTL", func(t *testing.T) {
		for _, tc := range []struct {
			extension int64
			write     bool
		}{{1, false}, {999, false}, {1000, true}, {5000, true}} {
			t.Run(fmt.Sprintf("extension %dms", tc.extension), func(t *testing.T) {
				cfg := core.Config{StateTTL: ttl, ResetOnDuplicate: true, CleanupTimers: true}
				var st core.State
				require.Equal(t, core.Emit, core.First{Config: cfg}.OnRow(&st, core.Row{Kind: rowkind.Insert, Time: t0}, t0).Outcome)
				before := st

				d := core.First{Config: cfg}.OnRow(&st, core.Row{Kind: rowkind.Insert, Time: t0}, t0+tc.extension)
				assert.Equal(t, core.DropDuplicate, d.Outcome)
				assert.True(t, d.Refreshed, "Refreshed is set however small the extension")
				assert.Equal(t, tc.write, d.Write)
				assert.Equal(t, core.Timer{Kind: core.Cleanup, At: t0 + tc.extension + ttl}, d.Timer, "the timer moves on every refresh")
				if tc.write {
					assert.Equal(t, t0+tc.extension+ttl, st.ExpireAt)
				} else {
					assert.Equal(t, before, st, "a throttled refresh leaves the state as it was")
				}
			})
		}
	})

	t.Run("StateTTL throttled refreshes accumulate until one is written", func(t *testing.T) {
		cfg := core.Config{StateTTL: ttl, ResetOnDuplicate: true}
		var st core.State
		core.First{Config: cfg}.OnRow(&st, core.Row{Kind: rowkind.Insert, Time: t0}, t0)
		for _, off := range []int64{300, 600, 999} {
			assert.False(t, core.First{Config: cfg}.OnRow(&st, core.Row{Kind: rowkind.Insert, Time: t0}, t0+off).Write, "+%dms", off)
		}
		assert.True(t, core.First{Config: cfg}.OnRow(&st, core.Row{Kind: rowkind.Insert, Time: t0}, t0+1000).Write, "1s past the stored expiry")
		assert.Equal(t, t0+1000+ttl, st.ExpireAt)
	})

	t.Run("EventTTL", func(t *testing.T) {
		for _, tc := range []struct {
			extension int64
			write     bool
		}{{1, false}, {999, false}, {1000, true}} {
			t.Run(fmt.Sprintf("extension %dms", tc.extension), func(t *testing.T) {
				cfg := core.Config{EventTTL: ttl, ResetOnDuplicate: true, CleanupTimers: true}
				var st core.State
				core.First{Config: cfg}.OnRow(&st, core.Row{Kind: rowkind.Insert, Time: t0}, t0)
				before := st
				d := core.First{Config: cfg}.OnRow(&st, core.Row{Kind: rowkind.Insert, Time: t0 + tc.extension}, t0)
				assert.True(t, d.Refreshed)
				assert.Equal(t, tc.write, d.Write)
				assert.Equal(t, core.Timer{Kind: core.Cleanup, At: t0 + tc.extension + ttl + 1}, d.Timer)
				if !tc.write {
					assert.Equal(t, before, st)
				}
			})
		}
	})

	t.Run("a TTL under RefreshFraction ms writes every refresh", func(t *testing.T) {
		cfg := core.Config{StateTTL: 50, ResetOnDuplicate: true}
		var st core.State
		core.First{Config: cfg}.OnRow(&st, core.Row{Kind: rowkind.Insert, Time: t0}, t0)
		d := core.First{Config: cfg}.OnRow(&st, core.Row{Kind: rowkind.Insert, Time: t0}, t0+1)
		assert.True(t, d.Write)
		assert.Equal(t, t0+51, st.ExpireAt)
	})
}

func TestRule_StaleTimerFiringsAreIgnored(t *testing.T) {
	cfg := core.Config{EventTime: true, StateTTL: 5 * minute, ResetOnDuplicate: true, CleanupTimers: true}
	pending := core.State{Phase: core.Pending, CandTime: at(10, 1), MaxEvent: at(10, 2), Cand: []byte("view")}
	emitted := core.State{Phase: core.Emitted, CandTime: at(10, 1), MaxEvent: at(10, 1), ExpireAt: at(12, 7), CleanupAt: at(10, 6)}
	for _, tc := range []struct {
		name     string
		st       core.State
		finalize bool
		hold     int64
	}{
		{"finalize with a hold other than the candidate's time", pending, true, at(10, 2)},
		{"cleanup firing on a pending candidate", pending, false, at(10, 1)},
		{"finalize firing on an emitted key", emitted, true, at(10, 1)},
		{"finalize firing on an absent key", core.State{}, true, at(10, 1)},
		{"cleanup firing on an absent key", core.State{}, false, at(10, 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := tc.st
			d := cfg.OnTimer(&st, tc.finalize, tc.hold, at(12, 3), globalWindowEnd)
			assert.Equal(t, core.TimerDecision{Stale: true}, d, "stale: no emit, no write, no timer")
			assert.Equal(t, tc.st, st, "state untouched")
		})
	}

	t.Run("a replaced candidate is emitted once", func(t *testing.T) {
		s := newSim(t, cfg, at(12, 0))
		s.AdvanceWatermark(at(9, 0))
		s.Arrive("k", rowkind.Insert, at(10, 2), "click")
		s.Arrive("k", rowkind.Insert, at(10, 1), "view")
		s.AdvanceWatermark(at(10, 5))
		assert.Equal(t, []string{"view"}, s.Rows())
	})
}

// Event-time mode checks a key's processing-time expiry with its one
// event-time timer, one TTL past the expiry: emitted at 12:00 with a
// 5-minute TTL, the key expires at 12:05 and is checked when the watermark
// reaches 12:10. A watermark behind the wall clock gets there only after
// 12:05, so the one check finds the key expired and deletes it.
func TestRule_EventTimeStateTTLChecksTheExpiryOnceATTLPastIt(t *testing.T) {
	cfg := core.Config{EventTime: true, StateTTL: 5 * minute, ResetOnDuplicate: true, CleanupTimers: true}
	s := emitEventTime(t, cfg, at(12, 0), at(10, 1), at(12, 0)) // expires 12:05
	timer, _ := s.Timer("k")
	require.Equal(t, core.Timer{Kind: core.Cleanup, At: at(12, 10)}, timer, "the check: the expiry plus the TTL")

	s.AdvanceClock(at(12, 4))
	s.AdvanceWatermark(at(12, 4) - second) // behind the wall clock, as a live watermark is
	assert.Equal(t, core.Emitted, s.State("k").Phase)
	assert.Equal(t, core.DropLate, s.Arrive("k", rowkind.Insert, s.wm, "late").Outcome, "the key still deduplicates")
	s.AdvanceClock(at(12, 11))
	s.AdvanceWatermark(at(12, 10))
	assert.Equal(t, core.None, s.State("k").Phase, "the check found the key expired and cleared it")
	assert.Equal(t, 2, s.firings, "the finalization and the one check")
	_, set := s.Timer("k")
	assert.False(t, set, "no timer left")
	assert.Equal(t, []string{"first"}, s.Rows())
}

// At the end of a finite input the watermark jumps to the end of time,
// long before any key's processing-time expiry. Each key's check then
// fires at once and finds the key unexpired; it keeps the state (the
// runner drops it with the window) and sets no further timer, so a key
// costs at most two firings at the end: its finalization, if it was still
// pending, and its check.
func TestRule_EventTimeStateTTLCostsAtMostTwoFiringsPerKeyAtTheEndOfInput(t *testing.T) {
	cfg := core.Config{EventTime: true, StateTTL: time.Hour.Milliseconds(), ResetOnDuplicate: true, CleanupTimers: true}
	for _, tc := range []struct {
		name    string
		emitted bool // emitted before the end of the input
		firings int
	}{
		{"emitted before the end", true, 1},
		{"pending at the end", false, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(t, cfg, at(12, 0))
			s.AdvanceWatermark(at(10, 0))
			for i := range 100 {
				require.Equal(t, core.BecomeCandidate, s.Arrive(fmt.Sprintf("k%d", i), rowkind.Insert, at(10, 1)+int64(i), "first").Outcome)
			}
			if tc.emitted {
				s.AdvanceWatermark(at(10, 2))
				require.Len(t, s.Rows(), 100)
			}
			before := s.firings
			s.AdvanceWatermark(globalWindowEnd) // the end of the input, before any expiry (13:00)
			assert.Equal(t, 100*tc.firings, s.firings-before, "firings per key at the end of the input")
			assert.Len(t, s.Rows(), 100)
			for k := range s.keys {
				assert.Equal(t, core.Emitted, s.State(k).Phase, "kept: the runner drops it with the window")
				_, set := s.Timer(k)
				assert.False(t, set, "no timer left")
			}
		})
	}
}

// A watermark more than a TTL ahead of the wall clock (event times from the
// future) looks like the end of the input to the check: the key is kept,
// and dedup is exact still, because its next row checks the expiry on
// arrival.
func TestRule_EventTimeStateTTLWatermarkAheadOfTheClockKeepsTheKeyUntilItsNextRow(t *testing.T) {
	cfg := core.Config{EventTime: true, StateTTL: 5 * minute, ResetOnDuplicate: true, CleanupTimers: true}
	s := emitEventTime(t, cfg, at(9, 0), at(10, 1), at(9, 0)) // wall clock 9:00, event time 10:01; expires 9:05
	timer, _ := s.Timer("k")
	require.Equal(t, core.Timer{Kind: core.Cleanup, At: at(10, 6)}, timer, "past the candidate's time, the later of the two")
	s.AdvanceClock(at(9, 1))
	s.AdvanceWatermark(at(10, 6))
	assert.Equal(t, core.Emitted, s.State("k").Phase, "not expired at 9:01: kept")
	_, set := s.Timer("k")
	assert.False(t, set, "no further check")
	assert.Equal(t, core.DropLate, s.Arrive("k", rowkind.Insert, at(10, 7), "before the expiry").Outcome)
	s.AdvanceClock(at(9, 5))
	assert.Equal(t, core.BecomeCandidate, s.Arrive("k", rowkind.Insert, at(10, 8), "after the expiry").Outcome, "a new period")
}

func TestRule_EventTimeStateTTLCleanupTimerPastTheWindowEndIsSetAtTheWindowEnd(t *testing.T) {
	cfg := core.Config{EventTime: true, StateTTL: 5 * minute, ResetOnDuplicate: true, CleanupTimers: true}
	s := newSim(t, cfg, at(12, 0))
	s.windowEnd = at(10, 3) - 1 // window [10:00, 10:03)
	s.AdvanceWatermark(at(10, 0))
	s.Arrive("k", rowkind.Insert, at(10, 1), "first")
	s.AdvanceWatermark(at(10, 1))
	require.Equal(t, []string{"first"}, s.Rows())
	timer, _ := s.Timer("k")
	assert.Equal(t, core.Timer{Kind: core.Cleanup, At: at(10, 3) - 1}, timer, "the 12:10 check is clamped to the window end, overwriting the finalization")
	assert.Equal(t, core.Emitted, s.State("k").Phase)
	s.AdvanceClock(at(12, 1))
	assert.Equal(t, core.DropLate, s.Arrive("k", rowkind.Insert, at(10, 2), "late").Outcome)
}

// Window [10:00, 10:10): the expiry check (12:10) is clamped to the window
// end, where it fires while the processing-time expiry (12:05) is ahead.
// The key must still drop its later rows in this window until 12:05 (the
// runner drops the window's state at its end anyway).
func TestRule_EventTimeStateTTLCheckAtTheWindowEndDoesNotEndThePeriodEarly(t *testing.T) {
	cfg := core.Config{EventTime: true, StateTTL: 5 * minute, ResetOnDuplicate: true, CleanupTimers: true}
	s := newSim(t, cfg, at(12, 0))
	s.windowEnd = at(10, 10) - 1
	s.AdvanceWatermark(at(10, 0))
	s.Arrive("k", rowkind.Insert, at(10, 1), "first")
	s.AdvanceWatermark(at(10, 1)) // emitted @12:00, expires 12:05, checked at the window end
	s.AdvanceClock(at(12, 1))
	s.AdvanceWatermark(s.windowEnd) // the check fires: not expired
	assert.Equal(t, core.Emitted, s.State("k").Phase, "still retained: 12:01 < 12:05")
	s.AdvanceClock(at(12, 2))
	assert.Equal(t, core.DropLate, s.Arrive("k", rowkind.Insert, at(10, 7), "later").Outcome)
	assert.Equal(t, []string{"first"}, s.Rows())
	_, set := s.Timer("k")
	assert.False(t, set, "no timer past the window end")
}

// Watermarkless, EventTTL 8s, window [10:00:00, 10:00:40). k emitted at
// event time 10:00:00 sets its cleanup timer at 10:00:08.001. A row at
// 10:00:32 starts a new period (more than 8s later); its cleanup timer,
// 10:00:40.001, is past the window end, so it is not set and the 10:00:08.001
// timer stays. When the watermark passes it, OnTimer takes it for the
// latest timer and clears the new period, so a row at 10:00:35 (within 8s of
// 10:00:32, on time) is emitted again. The same happens when a refresh moves
// the timer past the window end.
func TestRule_EventTimeTTLCleanupTimerPastTheWindowEndDoesNotLetAnOlderTimerEndThePeriod(t *testing.T) {
	e := at(10, 0)
	for _, tc := range []struct {
		name     string
		cfg      core.Config
		secondAt int64        // event time of the row that starts a new period or refreshes
		want     core.Outcome // its outcome
	}{
		// first timer e+8.001s; period 2 timer e+40.001s, not set
		{"new period", core.Config{EventTTL: 8 * second, CleanupTimers: true}, e + 32*second, core.Emit},
		// first timer e+30.001s; refreshed timer e+45.001s, not set
		{"refresh", core.Config{EventTTL: 30 * second, ResetOnDuplicate: true, CleanupTimers: true}, e + 15*second, core.DropDuplicate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(t, tc.cfg, at(12, 0))
			s.windowEnd = e + 40*second - 1
			s.AdvanceWatermark(e)
			require.Equal(t, core.Emit, s.Arrive("k", rowkind.Insert, e, "first").Outcome)
			require.Equal(t, tc.want, s.Arrive("k", rowkind.Insert, tc.secondAt, "second").Outcome)
			s.AdvanceWatermark(e + tc.cfg.EventTTL + 2) // passes the first row's retention only
			assert.NotEqual(t, core.None, s.State("k").Phase, "the key's current retention has not ended")
			d := s.Arrive("k", rowkind.Insert, e+35*second, "later") // on time, within the current retention
			assert.Equal(t, core.DropDuplicate, d.Outcome)
			assert.Len(t, s.Out(), map[bool]int{true: 2, false: 1}[tc.want == core.Emit])
		})
	}
}

// ExpireAt 0 is a valid expiry: state written at now = -StateTTL (a clock
// before 1970, e.g. a test clock returning event times) expires at 0.
func TestRule_StateTTLExpiryHoldsWhateverTheClockValue(t *testing.T) {
	cfg := core.Config{StateTTL: 5 * minute}
	var st core.State
	require.Equal(t, core.Emit, core.First{Config: cfg}.OnRow(&st, core.Row{Kind: rowkind.Insert, Time: 0}, -5*minute).Outcome)
	d := core.First{Config: cfg}.OnRow(&st, core.Row{Kind: rowkind.Insert, Time: 0}, 0)
	assert.Equal(t, core.Emit, d.Outcome, "written at -5m with a 5m TTL: expired at 0")

	// The same through the persisted state.
	s := emitWatermarkless(t, cfg, -5*minute, 0)
	s.AdvanceClock(-1)
	assert.Equal(t, core.DropDuplicate, s.Arrive("k", rowkind.Insert, 0, "at -1ms").Outcome)
	s.AdvanceClock(0)
	assert.Equal(t, core.Emit, s.Arrive("k", rowkind.Insert, 0, "at 0").Outcome)
}

// A window's state lives until the window expires: until the watermark
// passes its max timestamp plus the allowed lateness (Beam drops a window's
// rows and state only then). A cleanup timer clamped to the window end fires
// when the watermark reaches the max timestamp, while the window still takes
// rows: at that very watermark, and for the whole allowed lateness
// (beam.AllowedLateness). The firing must not end the key's period unless
// its retention really ended; here it had not.
func TestRule_CleanupClampedToTheWindowEndDoesNotEndThePeriodBeforeTheWindowExpires(t *testing.T) {
	e := at(10, 0)
	windowEnd := e + 10*minute - 1 // window [10:00, 10:10)
	for _, tc := range []struct {
		name string
		cfg  core.Config
		want core.Outcome // of a row of the same window after the firing
	}{
		// emitted @12:00, retained until 12:05; checks at 10:06 then clamped 10:09:59.999
		{"event time, StateTTL", core.Config{EventTime: true, StateTTL: 5 * minute, CleanupTimers: true}, core.DropLate},
		// event time 10:01 retained until the watermark passes 10:21; timer clamped to 10:09:59.999
		{"event time, EventTTL", core.Config{EventTime: true, EventTTL: 20 * minute, CleanupTimers: true}, core.DropLate},
		{"watermarkless, EventTTL", core.Config{EventTTL: 20 * minute, CleanupTimers: true}, core.DropDuplicate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(t, tc.cfg, at(12, 0))
			s.windowEnd = windowEnd
			s.AdvanceWatermark(e)
			s.Arrive("k", rowkind.Insert, at(10, 1), "first")
			s.AdvanceWatermark(at(10, 1))
			require.Equal(t, []string{"first"}, s.Rows())
			s.AdvanceClock(at(12, 1))
			s.AdvanceWatermark(at(10, 6))
			s.AdvanceWatermark(windowEnd) // the window has not expired yet
			assert.NotEqual(t, core.None, s.State("k").Phase, "retention has not ended and the window is open")

			d := s.Arrive("k", rowkind.Insert, at(10, 5), "same window")
			assert.Equal(t, tc.want, d.Outcome)
			s.Fire()
			assert.Equal(t, []string{"first"}, s.Rows())
		})
	}
}

func TestConfig_FamilyIsOneFamilyPerOptionCombinationAndCoversEveryTimer(t *testing.T) {
	for mask := range 32 {
		cfg := core.Config{
			EventTime:        mask&1 != 0,
			ResetOnDuplicate: mask&2 != 0,
			CleanupTimers:    mask&4 != 0,
		}
		if mask&8 != 0 {
			cfg.StateTTL = 5 * minute
		}
		if mask&16 != 0 {
			cfg.EventTTL = 10 * minute
		}
		t.Run(fmt.Sprintf("%+v", cfg), func(t *testing.T) {
			want := core.NoFamily
			switch {
			case cfg.EventTime:
				want = core.EventTimeFamily // finalization
			case !cfg.CleanupTimers:
				want = core.NoFamily
			case cfg.EventTTL > 0:
				want = core.EventTimeFamily
			case cfg.StateTTL > 0:
				want = core.ProcessingTimeFamily
			}
			assert.Equal(t, want, cfg.Family())

			// Every timer the core asks for in a busy scenario belongs to
			// that family (the sim fails otherwise); none without one.
			s := newSim(t, cfg, at(12, 0))
			kinds := []rowkind.Kind{rowkind.Insert, rowkind.Insert, rowkind.UpdateBefore, rowkind.UpdateAfter, rowkind.Delete}
			if cfg.EventTime {
				kinds = []rowkind.Kind{rowkind.Insert}
			}
			timers := 0
			for i := range 60 {
				s.AdvanceClock(at(12, 0) + int64(i)*20*second)
				s.AdvanceWatermark(at(10, 0) + int64(i)*30*second)
				key := fmt.Sprintf("k%d", i%3)
				d := s.Arrive(key, kinds[i%len(kinds)], at(10, 0)+int64((i*7)%40)*minute, fmt.Sprintf("r%d", i))
				if d.Timer.Kind != core.NoTimer {
					timers++
				}
			}
			s.AdvanceClock(at(14, 0))
			s.AdvanceWatermark(globalWindowEnd)
			if want == core.NoFamily {
				assert.Zero(t, timers+s.firings, "no timers without a family")
			} else {
				assert.NotZero(t, timers, "the scenario exercises the timers")
			}
		})
	}
}

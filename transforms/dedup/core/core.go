// Package core is the decision core of dedup.KeepFirst: the rules of
// DEDUPLICATE_KEEP_FIRST as pure functions over one key's state.
//
// It has no Beam imports. The Beam DoFn in package dedup is a thin adapter:
// it reads a key's State, calls OnRow or OnTimer, writes the state back when
// the Decision says so, sets the one timer the Decision names and emits.
// Every rule lives here once, so it is tested here once, with a fake clock.
//
// All times are Unix milliseconds. Processing time ("now") is passed in by
// the caller; event time is the row's Beam timestamp.
package core

import (
	"github.com/beamdedup/beamdedup/coders/statecoder"
	"github.com/beamdedup/beamdedup/transforms/rowkind"
)

// Phase is where a key is in its deduplication period (defined beside the
// state's persisted form, so that coders import no transform).
type Phase = statecoder.Phase

// Phases of a key.
const (
	None    = statecoder.None
	Pending = statecoder.Pending
	Emitted = statecoder.Emitted
)

// State is one key's deduplication state; its type and persisted form are
// coders/statecoder's.
type State = statecoder.State

// Outcome is what happened to an arriving row. Each row has exactly one,
// and each maps to one metric.
type Outcome uint8

// Outcomes of OnRow.
const (
	// Emit: watermarkless first row of a period; emit it now.
	Emit Outcome = iota
	// BecomeCandidate: event-time first row of a period; pending.
	BecomeCandidate
	// ReplaceCandidate: an earlier event time replaced the pending
	// candidate (the old candidate is the row counted as replaced).
	ReplaceCandidate
	// DropDuplicate: a later row of a key that is seen (emitted, or
	// pending with an earlier or equal candidate).
	DropDuplicate
	// DropLate: event-time mode, a row of a key already finalized.
	DropLate
	// Swallow: a -U/-D of a key already emitted.
	Swallow
	// IgnoreRetraction: a -U/-D of a key not seen; it does not mark it.
	IgnoreRetraction
)

var outcomeNames = [...]string{"emitted", "became_candidate", "replaced_candidate", "dropped_duplicate", "dropped_late", "swallowed", "ignored_retraction"}

func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "unknown"
}

// TimerKind says which timer, if any, a decision sets. A configuration has
// at most one timer family (see Config.Family): Beam Go 2.77 hangs a DoFn
// with two timer fields.
type TimerKind uint8

// Timer kinds.
const (
	NoTimer TimerKind = iota
	// Finalize: event-time timer at the candidate's time, holding the
	// output watermark there so the emitted row is on time downstream.
	Finalize
	// Cleanup: a timer that only deletes state; it must not hold the
	// watermark.
	Cleanup
)

// Timer is a timer to set (overwriting the key's timer; timers are never
// cleared, since clearing misbehaves on Prism).
type Timer struct {
	Kind TimerKind
	At   int64 // event time or processing time, per Config.Family
}

// Family is the one timer family a configuration uses.
type Family uint8

// Timer families.
const (
	NoFamily Family = iota
	EventTimeFamily
	ProcessingTimeFamily
)

// Decision is the result of OnRow.
type Decision struct {
	Outcome Outcome
	// Write: the state changed and must be written (or cleared when
	// State.Phase is None).
	Write bool
	// Expired: the key's previous period had expired on arrival.
	Expired bool
	// Refreshed: the row extended the key's retention.
	Refreshed bool
	Timer     Timer
}

// Config holds the options that shape the rules.
type Config struct {
	// EventTime: OnTime was given (event-time mode).
	EventTime bool
	// StateTTL is the processing-time retention in ms; 0 = forever.
	StateTTL int64
	// EventTTL is the event-time retention in ms; 0 = none.
	EventTTL int64
	// ResetOnDuplicate: a dropped +I/+U duplicate of an emitted key
	// refreshes its retention.
	ResetOnDuplicate bool
	// CleanupTimers: set timers that delete idle state. False on bounded
	// input, where state ends with the input and a processing-time timer
	// would keep the job alive until it fires.
	CleanupTimers bool
	// KeepLast only (last.go). Ordered: OnTime or SequenceBy orders rows
	// (else arrival order). Upsert: no -U rows. RetractOnExpiry: emit a -D
	// of a key's stored row when the key expires.
	Ordered, Upsert, RetractOnExpiry bool
}

// RefreshFraction throttles refresh writes: a duplicate that extends a
// key's retention by less than TTL/RefreshFraction does not rewrite the
// state (its timer is still pushed forward). Expiry checked on arrival is
// then at most TTL/RefreshFraction early.
const RefreshFraction = 100

// Family returns the timer family the configuration needs, at most one.
func (c Config) Family() Family {
	switch {
	case c.EventTime:
		return EventTimeFamily // finalization; cleanup shares it
	case !c.CleanupTimers:
		return NoFamily
	case c.EventTTL > 0:
		return EventTimeFamily
	case c.StateTTL > 0:
		return ProcessingTimeFamily
	}
	return NoFamily
}

// expired reports whether an emitted key's period has ended by the time a
// row with event time et arrives at processing time now. Expiry is
// inclusive: state written at t with TTL d is expired at any now >= t+d.
func (c Config) expired(st *State, et, now int64) bool {
	if st.Phase != Emitted {
		return false // a pending candidate has no TTL
	}
	// No "ExpireAt != 0" guard: 0 is a valid expiry (a clock before 1970).
	if c.StateTTL > 0 && now >= st.ExpireAt {
		return true
	}
	if c.EventTTL > 0 && et > st.MaxEvent+c.EventTTL {
		return true
	}
	return false
}

// OnRow decides on a row of kind k with event time et arriving at
// processing time now, updating st in place.
func (c Config) OnRow(st *State, k rowkind.Kind, et, now int64) Decision {
	var d Decision
	if c.expired(st, et, now) {
		*st = State{}
		d.Expired = true
		d.Write = true // at least clear the expired state
	}
	switch st.Phase {
	case None:
		if k.IsRetraction() {
			d.Outcome = IgnoreRetraction
			return d
		}
		d.Write = true
		if c.EventTime {
			*st = State{Phase: Pending, CandTime: et}
			d.Outcome = BecomeCandidate
			d.Timer = Timer{Kind: Finalize, At: et}
			return d
		}
		*st = State{Phase: Emitted}
		if c.EventTTL > 0 { // stored only when needed: it is most of a seen marker's bytes
			st.MaxEvent = et
		}
		if c.StateTTL > 0 {
			st.ExpireAt = now + c.StateTTL
		}
		d.Outcome = Emit
		d.Timer = c.cleanupAfterEmit(st)
		return d
	case Pending:
		if et < st.CandTime {
			st.CandTime = et
			d.Write = true
			d.Outcome = ReplaceCandidate
			d.Timer = Timer{Kind: Finalize, At: et}
			return d
		}
		d.Outcome = DropDuplicate // ties: the first arrival stays
		return d
	default: // Emitted
		switch {
		case k.IsRetraction():
			d.Outcome = Swallow
		case c.EventTime:
			d.Outcome = DropLate
		default:
			d.Outcome = DropDuplicate
			if c.ResetOnDuplicate {
				c.refresh(st, et, now, &d.Refreshed, &d.Write, &d.Timer)
			}
		}
		return d
	}
}

// cleanupAfterEmit returns the cleanup timer for a key just emitted, and
// records what the state needs to recognise it.
func (c Config) cleanupAfterEmit(st *State) Timer {
	if !c.CleanupTimers {
		return Timer{}
	}
	switch c.Family() {
	case ProcessingTimeFamily:
		return Timer{Kind: Cleanup, At: st.ExpireAt}
	case EventTimeFamily:
		if c.EventTTL > 0 {
			return Timer{Kind: Cleanup, At: st.MaxEvent + c.EventTTL + 1}
		}
		if c.StateTTL > 0 { // event-time mode: re-arming check of the processing-time expiry
			st.CleanupAt = st.CandTime + c.StateTTL
			st.Rearms = 0
			return Timer{Kind: Cleanup, At: st.CleanupAt}
		}
	}
	return Timer{}
}

// refresh extends an emitted key's retention for a duplicate (watermarkless
// mode only). State is rewritten only when the extension is worth at least
// TTL/RefreshFraction; the cleanup timer moves on every refresh.
func (c Config) refresh(st *State, et, now int64, refreshed, write *bool, timer *Timer) {
	if c.StateTTL > 0 {
		exp := now + c.StateTTL
		if exp > st.ExpireAt {
			*refreshed = true
			if exp-st.ExpireAt >= max(c.StateTTL/RefreshFraction, 1) {
				st.ExpireAt = exp
				*write = true
			}
			if c.CleanupTimers && c.Family() == ProcessingTimeFamily {
				*timer = Timer{Kind: Cleanup, At: exp}
			}
		}
	}
	if c.EventTTL > 0 && et > st.MaxEvent {
		*refreshed = true
		if et-st.MaxEvent >= max(c.EventTTL/RefreshFraction, 1) {
			st.MaxEvent = et
			*write = true
		}
		if c.CleanupTimers {
			*timer = Timer{Kind: Cleanup, At: et + c.EventTTL + 1}
		}
	}
}

// ClampToWindow moves an event-time cleanup timer past the window's end to
// the window's end. A cleanup timer must always be set (overwriting the
// key's older one), or the older one would fire and end a newer period:
// OnTimer trusts a cleanup firing to be the key's latest timer.
func ClampToWindow(t Timer, windowEnd int64) Timer {
	if t.Kind == Cleanup && t.At > windowEnd {
		t.At = windowEnd
	}
	return t
}

// TimerDecision is the result of OnTimer.
type TimerDecision struct {
	// Emit: emit the pending candidate (State.Cand before the call) with
	// its event time EmitTime.
	Emit     bool
	EmitTime int64
	// Write: the state changed (cleared when its Phase is None).
	Write bool
	// Expired: the timer ended the key's period.
	Expired bool
	// Stale: the firing matched nothing in the state and was ignored.
	Stale bool
	// Retract: KeepLast with RetractOnExpiry; emit a -D of the stored row
	// (State.Cand before the call), which the expiry deleted.
	Retract bool
	Timer   Timer
}

// OnTimer decides on the firing of the key's timer. finalize is true for a
// firing of a Finalize timer, whose hold time is holdTime; now is the
// processing time and windowEnd the last event time of the key's window
// (timers past it are not set: the runner drops the window's state then).
func (c Config) OnTimer(st *State, finalize bool, holdTime, now, windowEnd int64) TimerDecision {
	var d TimerDecision
	switch st.Phase {
	case Pending:
		if !finalize || holdTime != st.CandTime {
			d.Stale = true // a cleanup timer or an overwritten finalization
			return d
		}
		d.Emit, d.EmitTime = true, st.CandTime
		*st = State{Phase: Emitted, CandTime: st.CandTime}
		if c.EventTTL > 0 {
			st.MaxEvent = st.CandTime
		}
		if c.StateTTL > 0 {
			st.ExpireAt = now + c.StateTTL // retention starts at emission
		}
		d.Write = true
		d.Timer = ClampToWindow(c.cleanupAfterEmit(st), windowEnd)
		return d
	case Emitted:
		if finalize {
			d.Stale = true
			return d
		}
		stateExpired := c.StateTTL > 0 && now >= st.ExpireAt
		if c.EventTime && c.EventTTL == 0 && c.StateTTL > 0 && !stateExpired {
			// Event-time mode with StateTTL: the event-time cleanup timer
			// checks the processing-time expiry and re-arms until it passed.
			if st.CleanupAt >= windowEnd {
				// The last check, at the window's end: keep the state (rows
				// of this window may still come until it expires) and let
				// the runner drop it with the window.
				return d
			}
			step := c.StateTTL << min(st.Rearms+1, 40)
			next := st.CleanupAt + step
			if next < st.CleanupAt || next > windowEnd {
				next = windowEnd
			}
			st.CleanupAt = next
			st.Rearms++
			d.Write = true
			d.Timer = Timer{Kind: Cleanup, At: next}
			return d
		}
		if c.Family() == EventTimeFamily && c.EventTTL > 0 && st.MaxEvent+c.EventTTL+1 > windowEnd && !stateExpired {
			// The cleanup was clamped to the window's end, before the
			// retention ends: keep the state until the window expires.
			return d
		}
		// A cleanup timer fires only at the latest time it was set to
		// (timers are overwritten, never cleared), so the key expired.
		d.Retract = c.RetractOnExpiry && len(st.Cand) > 0
		*st = State{}
		d.Write, d.Expired = true, true
		return d
	}
	d.Stale = true
	return d
}

// Package core is the decision core of beamdedup's deduplications: the
// rules of KeepFirst (DEDUPLICATE_KEEP_FIRST) and KeepLast (keep-last, a
// changelog of each key's current row) as pure functions over one key's
// state, deciding which row wins with rowspec's comparator, as every
// expansion and the sink do.
//
// It has no Beam imports. The Beam steps in package dedup are thin
// adapters: the stateful step reads a key's State, asks its Rules (First or
// Last) about a row or a timer firing, writes the state back when the
// Decision says so, sets the one timer it names and emits; the bounded and
// window expansions merge a key's rows with Direction.Merge and account for
// them with Rules.Settle. Every rule lives here once, so it is tested here
// once, with a fake clock.
//
// All times are Unix milliseconds, as Beam's timestamps, watermarks and
// timers are; only which row wins compares a row's OnTime value to the
// microsecond (Row.Micros, rowcol.Order). Processing time ("now") is
// passed in by the caller; event time is the row's Beam timestamp.
//
// It is the rules layer of package dedup, not an API of its own: it exports
// what dedup (and the tests that check the rules) call, and nothing here is
// promised to stay from one release to the next except what dedup's
// persisted state depends on, which lives in internal/statecoder (State,
// Phase, the layouts). A pipeline calls package dedup.
package core

import (
	"github.com/beamdedup/beamdedup/internal/micros"
	"github.com/beamdedup/beamdedup/internal/rowcol"
	"github.com/beamdedup/beamdedup/transforms/dedup/internal/statecoder"
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

// State is one key's deduplication state; its type and persisted forms are
// internal/statecoder's.
type State = statecoder.State

// Rules are one deduplication's decisions: First (KeepFirst) or Last
// (KeepLast). The stateful step drives either through OnRow and OnTimer;
// the bounded and window expansions account for a key's merged rows with
// Settle.
type Rules interface {
	// OnRow decides on row r arriving at processing time now at a key with
	// state st, updating st in place.
	OnRow(st *State, r Row, now int64) Decision
	// OnTimer decides on a firing of the key's timer: finalize is true for
	// a Finalize timer, whose hold time is hold; windowEnd is the last
	// event time of the key's window (timers past it are not set: the
	// runner drops the window's state then).
	OnTimer(st *State, finalize bool, hold, now, windowEnd int64) TimerDecision
	// Settle accounts for a key's rows merged into m (bounded input, window
	// dedup): whether m's row is emitted, and where every row went.
	Settle(m Candidate) Settlement
}

// Row is a row arriving at a key.
type Row struct {
	Kind rowkind.Kind
	Time int64 // event time (the row's timestamp), Unix ms
	// Micros are the microseconds of the row's OnTime value past Time's
	// millisecond (0 to 999; 0 for an int64 column or without OnTime): rows
	// compare to the microsecond, timers and retention to the millisecond.
	Micros uint16
	// Stamped: Time is the row's timestamp, not its OnTime value (no
	// OnTime); it orders rows without a value (rowcol.Order).
	Stamped bool
	Seq     []byte // its SequenceBy value (rowcol.SeqColumn); nil without SequenceBy
	// Row is the row's encoding, normalized to kind +I, which Last compares
	// and stores but never reads. First never compares rows and takes nil:
	// a decision that makes the row the key's candidate says so (Stored),
	// and the caller encodes it then.
	Row []byte
}

// Order is the row's place in its key's order.
func (r Row) Order() rowcol.Order {
	return rowcol.Order{Seq: r.Seq, Time: micros.Of(r.Time, r.Micros), Stamped: r.Stamped, Retraction: r.Kind.IsRetraction()}
}

// stored is the order of a key's stored row (First's candidate, Last's
// row or tombstone): a tombstone, a retraction's value with no row, ranks
// as the retraction it stands for. (The state compares only where rows are
// ordered by a value, so never Stamped without a SequenceBy value.)
func stored(st *State) rowcol.Order {
	return rowcol.Order{Seq: st.Seq, Time: micros.Of(st.CandTime, st.Micros), Retraction: st.Phase == Emitted && len(st.Cand) == 0}
}

// Outcome is what happened to an input row. Each row has exactly one, and
// each maps to one metric.
type Outcome uint8

// Outcomes.
const (
	// Emit: KeepFirst, watermarkless, the first row of a period; emitted
	// now (and a kept row of a merge).
	Emit Outcome = iota
	// BecomeCandidate: KeepFirst, event time, the first row of a period;
	// pending until the watermark passes it (counted once it is emitted or
	// replaced).
	BecomeCandidate
	// ReplaceCandidate: an earlier event time replaced the pending
	// candidate (the old candidate is the row counted as replaced).
	ReplaceCandidate
	// DropDuplicate: a row of a key that is seen (KeepFirst), or equal to
	// the key's stored row (KeepLast).
	DropDuplicate
	// DropLate: KeepFirst, event time, a row of a key already finalized.
	DropLate
	// Swallow: KeepFirst, a -U/-D of a key already emitted.
	Swallow
	// IgnoreRetraction: a -U/-D of a key with nothing to retract; it does
	// not mark the key as seen.
	IgnoreRetraction
	// Inserted: KeepLast, the key's first row (or first after expiry or a
	// delete), emitted as +I.
	Inserted
	// Updated: KeepLast, the row replaced the key's stored row.
	Updated
	// DeletedIn: KeepLast, a -U/-D deleted the key's stored row.
	DeletedIn
	// OutOfOrder: KeepLast, ordered, the row ranks below the stored one.
	OutOfOrder
	// Superseded: KeepLast, merged away before the state by a row of the
	// key that ranks after it (bounded input, the mini-batch fold).
	Superseded

	// NumOutcomes is the number of outcomes.
	NumOutcomes = iota
)

var outcomeNames = [NumOutcomes]string{
	"emitted", "became_candidate", "replaced_candidate", "dropped_duplicate", "dropped_late", "swallowed",
	"ignored_retraction", "inserted", "updated", "deleted_in", "out_of_order", "superseded",
}

// DropsRow reports whether a row with outcome o is dropped: a duplicate, a
// late row, a swallowed change, an ignored retraction, an out-of-order or
// superseded version. (A replaced candidate is the pending row, not the
// arriving one.) Every other row is emitted, or becomes the key's
// candidate.
func (o Outcome) DropsRow() bool {
	switch o {
	case DropDuplicate, DropLate, Swallow, IgnoreRetraction, OutOfOrder, Superseded:
		return true
	}
	return false
}

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

// Emission is one output row of a decision: its kind, and whether it is
// the key's previously stored row (Old: State.Cand before the call) or the
// arriving row.
type Emission struct {
	Kind rowkind.Kind
	Old  bool
}

// Decision is the result of Rules.OnRow. Emit[:N] are the rows to emit, in
// order (Emissions).
type Decision struct {
	Outcome Outcome
	Emit    [2]Emission
	N       int
	// Write: the state changed and must be written (or cleared when its
	// Phase is None).
	Write bool
	// Stored: the arriving row is now the key's stored row or candidate
	// (State.Cand). A caller that passed no Row.Row sets State.Cand to its
	// encoding.
	Stored bool
	// Expired: the key's previous period had expired on arrival (with
	// RetractOnExpiry, Emit starts with a -D of the expired row).
	Expired bool
	// Refreshed: a duplicate extended the key's retention.
	Refreshed bool
	Timer     Timer
}

func (d *Decision) emit(k rowkind.Kind, old bool) {
	d.Emit[d.N] = Emission{Kind: k, Old: old}
	d.N++
}

// Emissions returns the rows to emit, in order.
func (d *Decision) Emissions() []Emission { return d.Emit[:d.N] }

// TimerDecision is the result of Rules.OnTimer.
type TimerDecision struct {
	// Emit: emit the key's stored row (State.Cand before the call) as Kind
	// with event time EmitTime: KeepFirst's finalized candidate (+I), or
	// KeepLast's expired row (-D, with RetractOnExpiry).
	Emit     bool
	Kind     rowkind.Kind
	EmitTime int64
	// Write: the state changed (cleared when its Phase is None).
	Write bool
	// Expired: the timer ended the key's period.
	Expired bool
	// Stale: the firing matched nothing in the state and was ignored.
	Stale bool
	Timer Timer
}

// Config holds the options that shape the rules.
type Config struct {
	// EventTime: KeepFirst with OnTime (event-time mode: the earliest row
	// is emitted when the watermark passes it). KeepLast's output is
	// immediate, so OnTime only orders its rows (Ordered).
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

// retain starts an emitted key's retention: stored row (or seen marker)
// with event time et at processing time now. Fields a configuration does
// not use stay zero, so that they are not persisted.
func (c Config) retain(st *State, et, now int64) {
	if c.EventTTL > 0 {
		st.MaxEvent = et
	}
	if c.StateTTL > 0 {
		st.ExpireAt = now + c.StateTTL
	}
}

// cleanupAfterEmit returns the cleanup timer for a key just emitted (or
// stored), and records what the state needs to recognise it.
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
		if c.StateTTL > 0 { // event-time mode: the one check of the processing-time expiry
			return Timer{Kind: Cleanup, At: c.expiryCheck(st)}
		}
	}
	return Timer{}
}

// expiryCheck is the event time at which event-time mode checks an
// emitted key's processing-time expiry (StateTTL; its one timer family is
// event time): one TTL past the expiry, or past the candidate's time if
// that is later. The watermark reaches it only after the wall clock has
// passed the expiry, unless the watermark runs more than a TTL ahead of the
// wall clock: at the end of a finite input, when it jumps to the end of
// time, or with event times from the future. So one firing per key
// suffices, and the end of a finite input costs each key at most two: its
// finalization and this check.
func (c Config) expiryCheck(st *State) int64 {
	return max(st.CandTime, st.ExpireAt) + c.StateTTL
}

// refresh is what a duplicate does to an emitted key's retention.
type refresh struct {
	Refreshed bool  // the retention was extended
	Write     bool  // by enough to rewrite the state
	Timer     Timer // the cleanup timer moved with it, or NoTimer
}

// refresh extends an emitted key's retention for a duplicate with event
// time et at processing time now. The state is rewritten only when the
// extension is worth at least TTL/RefreshFraction; the cleanup timer moves
// on every refresh.
func (c Config) refresh(st *State, et, now int64) refresh {
	var r refresh
	if c.StateTTL > 0 {
		if exp := now + c.StateTTL; exp > st.ExpireAt {
			r.Refreshed = true
			if exp-st.ExpireAt >= max(c.StateTTL/RefreshFraction, 1) {
				st.ExpireAt = exp
				r.Write = true
			}
			if c.CleanupTimers && c.Family() == ProcessingTimeFamily {
				r.Timer = Timer{Kind: Cleanup, At: exp}
			}
		}
	}
	if c.EventTTL > 0 && et > st.MaxEvent {
		r.Refreshed = true
		if et-st.MaxEvent >= max(c.EventTTL/RefreshFraction, 1) {
			st.MaxEvent = et
			r.Write = true
		}
		if c.CleanupTimers {
			r.Timer = Timer{Kind: Cleanup, At: et + c.EventTTL + 1}
		}
	}
	return r
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

// sameMiniBatchGroup reports whether a row arriving at processing time now
// may be folded with (KeepLast) or dropped after (KeepFirst) a key's row of
// the same bundle that arrived at since: always without StateTTL, else
// within TTL/RefreshFraction, so that no expiry decision moves by more than
// the refresh throttle already allows.
func (c Config) sameMiniBatchGroup(since, now int64) bool {
	return c.StateTTL == 0 || now-since < max(c.StateTTL/RefreshFraction, 1)
}

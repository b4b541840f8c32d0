package core

import (
	"bytes"

	"github.com/beamdedup/beamdedup/transforms/rowkind"
)

// The rules of keep-last deduplication (dedup.KeepLast), beside KeepFirst's
// in core.go and sharing their expiry, retention and cleanup timers. A
// key's state holds its last row: State.Phase is Emitted, State.Cand the
// encoded row (with its kind column normalized to +I, so that two rows equal
// in every other column encode equally), State.CandTime its event time and
// State.Seq its SequenceBy value. Config.EventTime is false for KeepLast:
// its output is immediate, never held for the watermark, so only cleanup
// timers exist.
//
// In ordered mode a retraction leaves a tombstone: Phase Emitted with no
// row (Cand empty) and the retraction's ordering value, so that a row older
// than the deletion, arriving after it, stays deleted, as the bounded
// merge decides. Tombstones expire with the key's retention.

// LastRow is a row arriving at KeepLast.
type LastRow struct {
	Kind rowkind.Kind
	Time int64  // event time (the row's timestamp)
	Seq  []byte // its SequenceBy value (coders/ordercoder); nil without SequenceBy
	Row  []byte // encoded, kind normalized; the core compares it, never reads it
}

// LastOutcome is what happened to a row arriving at KeepLast. Each row has
// exactly one, and each maps to one metric.
type LastOutcome uint8

// Outcomes of OnLastRow.
const (
	// Inserted: the key's first row (or first after expiry or a delete).
	Inserted LastOutcome = iota
	// Updated: the row replaced the key's stored row.
	Updated
	// DeletedIn: a -U/-D deleted the key's stored row.
	DeletedIn
	// Duplicate: the row equals the stored one; nothing is emitted.
	Duplicate
	// OutOfOrder: ordered mode, the row's value is below the stored one's.
	OutOfOrder
	// IgnoredRetraction: a -U/-D of a key with no stored row.
	IgnoredRetraction
)

var lastOutcomeNames = [...]string{"inserted", "updated", "deleted_in", "duplicate", "out_of_order", "ignored_retraction"}

func (o LastOutcome) String() string {
	if int(o) < len(lastOutcomeNames) {
		return lastOutcomeNames[o]
	}
	return "unknown"
}

// Emission is one output row of KeepLast: its kind, and whether it carries
// the key's previous stored row (Old) or the arriving row.
type Emission struct {
	Kind rowkind.Kind
	Old  bool
}

// LastDecision is the result of OnLastRow. Emit[:N] are the rows to emit,
// in order.
type LastDecision struct {
	Outcome LastOutcome
	Emit    [2]Emission
	N       int
	// Write: the state changed and must be written (cleared when its Phase
	// is None).
	Write bool
	// Expired: the key's previous period had expired on arrival (with
	// RetractOnExpiry, Emit starts with a -D of the expired row).
	Expired bool
	// Refreshed: a duplicate extended the key's retention.
	Refreshed bool
	Timer     Timer
}

func (d *LastDecision) emit(k rowkind.Kind, old bool) {
	d.Emit[d.N] = Emission{Kind: k, Old: old}
	d.N++
}

// Emissions returns the rows to emit, in order.
func (d *LastDecision) Emissions() []Emission { return d.Emit[:d.N] }

// LastReplaces reports whether an arriving row with order (seq, t) replaces
// a stored one with order (storedSeq, storedT) in ordered mode (OnTime or
// SequenceBy): when its value is greater or equal, the SequenceBy value
// first, then the event time; ties go to the later arrival, as in Flink's
// keep-last. The mini-batch fold before the shuffle uses the same rule.
func LastReplaces(seq []byte, t int64, storedSeq []byte, storedT int64) bool {
	if c := bytes.Compare(seq, storedSeq); c != 0 {
		return c > 0
	}
	return t >= storedT
}

// OnLastRow decides on row r arriving at processing time now at a key with
// state st, updating st in place. The new stored row is r.Row; the caller
// keeps the previous st.Cand for the emissions marked Old.
func (c Config) OnLastRow(st *State, r LastRow, now int64) LastDecision {
	var d LastDecision
	if c.expired(st, r.Time, now) {
		if c.RetractOnExpiry && len(st.Cand) > 0 {
			d.emit(rowkind.Delete, true)
		}
		*st = State{}
		d.Expired = true
		d.Write = true // at least clear the expired state
	}
	if c.Ordered && st.Phase == Emitted && !LastReplaces(r.Seq, r.Time, st.Seq, st.CandTime) {
		d.Outcome = OutOfOrder // below the stored row or the tombstone
		return d
	}
	if st.Phase != Emitted || len(st.Cand) == 0 {
		if r.Kind.IsRetraction() {
			d.Outcome = IgnoredRetraction
			if c.Ordered {
				prev := *st
				c.tombstone(st, r, now)
				timer := c.cleanupAfterEmit(st)
				// A resent retraction leaves the tombstone as it was: no
				// write, and its timer is already set.
				if d.Expired || !prev.Equal(st) {
					d.Write, d.Timer = true, timer
				}
			}
			return d
		}
		c.store(st, r, now)
		d.Outcome = Inserted
		d.emit(rowkind.Insert, false)
		d.Write = true
		d.Timer = c.cleanupAfterEmit(st)
		return d
	}
	if r.Kind.IsRetraction() {
		d.emit(rowkind.Delete, true)
		*st = State{}
		d.Outcome = DeletedIn
		d.Write = true
		if c.Ordered {
			c.tombstone(st, r, now)
			d.Timer = c.cleanupAfterEmit(st)
		}
		return d // without a tombstone, the key's cleanup timer finds no state
	}
	if bytes.Equal(r.Row, st.Cand) {
		d.Outcome = Duplicate
		if c.Ordered && (r.Time != st.CandTime || !bytes.Equal(r.Seq, st.Seq)) {
			// The identical row is the later arrival with a value no smaller:
			// it is now the key's last row, so its value is the stored one
			// (as the bounded merge and the mini-batch fold decide). Only
			// SequenceBy without OnTime gets here: otherwise the value is a
			// column, equal in equal rows.
			st.CandTime, st.Seq = r.Time, r.Seq
			d.Write = true
		}
		if c.ResetOnDuplicate {
			c.refresh(st, r.Time, now, &d.Refreshed, &d.Write, &d.Timer)
		}
		return d
	}
	if !c.Upsert {
		d.emit(rowkind.UpdateBefore, true)
	}
	d.emit(rowkind.UpdateAfter, false)
	c.store(st, r, now)
	d.Outcome = Updated
	d.Write = true
	d.Timer = c.cleanupAfterEmit(st)
	return d
}

// tombstone records a retraction's ordering value in place of a row.
func (c Config) tombstone(st *State, r LastRow, now int64) {
	r.Row = nil
	c.store(st, r, now)
}

// store makes r the key's stored row, its retention starting now: every
// accepted row refreshes it.
func (c Config) store(st *State, r LastRow, now int64) {
	*st = State{Phase: Emitted, CandTime: r.Time, Cand: r.Row, Seq: r.Seq}
	if c.EventTTL > 0 {
		st.MaxEvent = r.Time
	}
	if c.StateTTL > 0 {
		st.ExpireAt = now + c.StateTTL
	}
}

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
// than the deletion, or as old (a retraction ranks after a live row of its
// value, rowcol.Order), arriving after it, stays deleted, as the bounded
// merge decides. Tombstones expire with the key's retention.

// Last is KeepLast's rules: per key the last row (by arrival, or ordered
// by OnTime or SequenceBy), emitted as a changelog on every change.
type Last struct{ Config }

// OnRow decides on row r arriving at processing time now at a key with
// state st, updating st in place. The new stored row is r.Row (required);
// the caller keeps the previous st.Cand for the emissions marked Old.
func (l Last) OnRow(st *State, r Row, now int64) Decision {
	c := l.Config
	var d Decision
	if c.expired(st, r.Time, now) {
		if c.RetractOnExpiry && len(st.Cand) > 0 {
			d.emit(rowkind.Delete, true)
		}
		*st = State{}
		d.Expired = true
		d.Write = true // at least clear the expired state
	}
	if c.Ordered && st.Phase == Emitted && !KeepLast.Replaces(r.Order(), stored(st)) {
		d.Outcome = OutOfOrder // below the stored row or the tombstone (a live row as old as a deletion too)
		return d
	}
	if st.Phase != Emitted || len(st.Cand) == 0 {
		if r.Kind.IsRetraction() {
			d.Outcome = IgnoreRetraction
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
		d.Write, d.Stored = true, true
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
		d.Outcome = DropDuplicate
		if c.Ordered && (r.Time != st.CandTime || r.Micros != st.Micros || !bytes.Equal(r.Seq, st.Seq)) {
			// The identical row is the later arrival with a value no smaller:
			// it is now the key's last row, so its value is the stored one
			// (as the bounded merge and the mini-batch fold decide). Only
			// SequenceBy without OnTime gets here: otherwise the value is a
			// column, equal in equal rows.
			st.CandTime, st.Micros, st.Seq = r.Time, r.Micros, r.Seq
			d.Write = true
		}
		if c.ResetOnDuplicate {
			rf := c.refresh(st, r.Time, now)
			d.Refreshed, d.Timer = rf.Refreshed, rf.Timer
			d.Write = d.Write || rf.Write
		}
		return d
	}
	if !c.Upsert {
		d.emit(rowkind.UpdateBefore, true)
	}
	d.emit(rowkind.UpdateAfter, false)
	c.store(st, r, now)
	d.Outcome = Updated
	d.Write, d.Stored = true, true
	d.Timer = c.cleanupAfterEmit(st)
	return d
}

// tombstone records a retraction's ordering value in place of a row.
func (c Config) tombstone(st *State, r Row, now int64) {
	r.Row = nil
	c.store(st, r, now)
}

// store makes r the key's stored row, its retention starting now: every
// accepted row refreshes it.
func (c Config) store(st *State, r Row, now int64) {
	*st = State{Phase: Emitted, CandTime: r.Time, Micros: r.Micros, Cand: r.Row, Seq: r.Seq}
	c.retain(st, r.Time, now)
}

// Settle accounts for a key's rows merged into m as KeepLast does on
// bounded input: the changelog collapsed to its final state, which a sink
// that holds an earlier state of the key must end with. The kept row is
// emitted as +I (Inserted), or, when it is a retraction (the key ends
// deleted), as a -D (DeletedIn), so that the key's row leaves a table that
// holds it; every other row was superseded.
func (Last) Settle(m Candidate) Settlement {
	var s Settlement
	if !m.Has {
		return s
	}
	s.add(Superseded, m.Rows+m.Retractions-1)
	s.Emit = true
	if m.Retract {
		s.Kind = rowkind.Delete
		s.add(DeletedIn, 1)
		return s
	}
	s.add(Inserted, 1)
	return s
}

package core

import "github.com/beamdedup/beamdedup/transforms/rowkind"

// First is KeepFirst's rules: per key the first row (by arrival, or in
// event-time mode the earliest), emitted once per period; later rows of the
// key are dropped until its retention ends.
type First struct{ Config }

// OnRow decides on row r (r.Row may be nil: First never reads it) arriving
// at processing time now, updating st in place. A row that becomes the
// key's candidate is Stored: the caller sets st.Cand to its encoding when
// it passed none.
func (f First) OnRow(st *State, r Row, now int64) Decision {
	c := f.Config
	var d Decision
	if c.expired(st, r.Time, now) {
		*st = State{}
		d.Expired = true
		d.Write = true // at least clear the expired state
	}
	switch st.Phase {
	case None:
		if r.Kind.IsRetraction() {
			d.Outcome = IgnoreRetraction
			return d
		}
		d.Write = true
		if c.EventTime {
			*st = State{Phase: Pending, CandTime: r.Time, Micros: r.Micros, Cand: r.Row}
			d.Outcome, d.Stored = BecomeCandidate, true
			d.Timer = Timer{Kind: Finalize, At: r.Time}
			return d
		}
		*st = State{Phase: Emitted}
		c.retain(st, r.Time, now)
		d.Outcome = Emit
		d.emit(rowkind.Insert, false)
		d.Timer = c.cleanupAfterEmit(st)
		return d
	case Pending:
		if KeepFirst.Replaces(r.Order(), stored(st)) {
			st.CandTime, st.Micros, st.Cand = r.Time, r.Micros, r.Row
			d.Write, d.Stored = true, true
			d.Outcome = ReplaceCandidate
			d.Timer = Timer{Kind: Finalize, At: r.Time}
			return d
		}
		d.Outcome = DropDuplicate // ties: the first arrival stays
		return d
	default: // Emitted
		switch {
		case r.Kind.IsRetraction():
			d.Outcome = Swallow
		case c.EventTime:
			d.Outcome = DropLate
		default:
			d.Outcome = DropDuplicate
			if c.ResetOnDuplicate {
				rf := c.refresh(st, r.Time, now)
				d.Refreshed, d.Write, d.Timer = rf.Refreshed, rf.Write, rf.Timer
			}
		}
		return d
	}
}

// Settle accounts for a key's rows merged into m as KeepFirst does (and
// window dedup, whose output is insert-only too): the kept row is emitted,
// every other +I/+U row is a duplicate, every -U/-D is swallowed; a key
// with only -U/-D rows is never seen, its rows ignored.
func (First) Settle(m Candidate) Settlement {
	var s Settlement
	if !m.Has {
		s.add(IgnoreRetraction, m.Retractions)
		return s
	}
	s.Emit = true
	s.add(Emit, 1)
	s.add(DropDuplicate, m.Rows-1)
	s.add(Swallow, m.Retractions)
	return s
}

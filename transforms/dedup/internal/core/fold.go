package core

import "github.com/beamdedup/beamdedup/internal/rowcol"

// The mini-batch steps before the shuffle: what the keying step may drop or
// fold within a bundle without changing any result.
//
// KeepLast's fold: the keying step holds each key's rows of a bundle and
// passes on only the one that decides the key's final state. Worked out
// against Last.OnRow:
//
//   - Arrival order: every +I/+U overwrites the stored row and every -U/-D
//     clears it (or is ignored when nothing is stored), so whatever the
//     key's state, the final state after the bundle is the one its last row
//     leaves. A retraction followed by an insert folds to the insert: the
//     insert replaces the stored row (-U/+U) where the unfolded sequence
//     deletes and re-inserts it (-D/+I), the same final state.
//   - Ordered (OnTime, SequenceBy): the stored ordering value only grows, so
//     the bundle's row that replaces every earlier one (KeepLast.Replaces:
//     the largest order, a retraction after a live row of its value, ties
//     to the later arrival) is accepted exactly when
//     the unfolded sequence ends with it, and every later row below it is
//     out of order in both. A retraction that wins leaves the same tombstone, and
//     a row identical to the stored one leaves its value stored (Last.OnRow's
//     duplicate with a larger value), as if it had replaced it.
//
// So one row per key per bundle suffices, and the stateful step emits at
// most one -U/+U pair (or +I, or -D) per key and bundle instead of a chain;
// intermediate versions are never emitted.
//
// With StateTTL the fold must not move expiry decisions: a key's rows fold
// only while they arrive within TTL/RefreshFraction of the first of them
// (the group), the precision KeepFirst's mini-batch and the refresh
// throttle already have; a later row passes the held one on and starts a
// new group. EventTimeTTL (whose expiry depends on every row's event time)
// and non-global windows turn the fold off, in the caller.

// Fold is what the mini-batch fold holds of a key's pending row.
type Fold struct {
	Has   bool
	Order rowcol.Order // the pending row's (its Seq a copy)
	Since int64        // processing time of the group's first row (StateTTL)
}

// FoldAction is what the fold does with an arriving row; each action tells
// the caller which rows leave the fold and how they are counted.
type FoldAction uint8

// Actions of FoldLastRow.
const (
	// FoldHold: the row becomes the key's pending row (the key had none).
	FoldHold FoldAction = iota
	// FoldReplace: the row replaces the pending row, which is superseded.
	FoldReplace
	// FoldDrop: the row is superseded by the pending row (ordered: its
	// value is below the pending one's, so it would be out of order).
	FoldDrop
	// FoldFlush: the pending row is passed on now and the row becomes the
	// pending row of a new group (StateTTL: the group's time is up).
	FoldFlush
)

var foldActionNames = [...]string{"hold", "replace", "drop", "flush"}

func (a FoldAction) String() string {
	if int(a) < len(foldActionNames) {
		return foldActionNames[a]
	}
	return "unknown"
}

// FoldLastRow decides on row r of a key arriving at the fold at processing
// time now, with the key's pending row p, updating p in place (its Seq is
// copied). r.Row is not read. Only Ordered and StateTTL of c matter.
func (c Config) FoldLastRow(p *Fold, r Row, now int64) FoldAction {
	hold := func() {
		o := r.Order()
		o.Seq = append(p.Order.Seq[:0], r.Seq...)
		if r.Seq == nil {
			o.Seq = nil
		}
		p.Has, p.Order = true, o
	}
	switch {
	case !p.Has:
		hold()
		p.Since = now
		return FoldHold
	case !c.sameMiniBatchGroup(p.Since, now):
		hold()
		p.Since = now
		return FoldFlush
	case c.Ordered && !KeepLast.Replaces(r.Order(), p.Order):
		return FoldDrop
	}
	hold()
	return FoldReplace
}

// Passed is what KeepFirst's mini-batch pre-filter remembers of a key's
// rows passed on in a bundle.
type Passed struct {
	Has   bool
	Since int64        // processing time of the key's first row passed on
	Order rowcol.Order // the smallest order passed on (event-time mode; its time to the microsecond)
}

// PreFilterFirstRow decides whether KeepFirst's keying step drops row r of
// a key arriving at processing time now, given what it passed on of the key
// in this bundle (p, updated in place), and with which outcome. A later
// +I/+U of a key passed on can only be a duplicate (in event-time mode,
// unless it is earlier than every row passed on: it may still become the
// candidate), and a -U/-D of it can only be swallowed; a retraction of a
// key not passed on must reach the state. With StateTTL a row is dropped
// only within the key's mini-batch group (sameMiniBatchGroup), so no row
// that could start a new period, or refresh retention by more than the
// documented precision, is dropped.
func (c Config) PreFilterFirstRow(p *Passed, r Row, now int64) (drop bool, o Outcome) {
	recent := p.Has && c.sameMiniBatchGroup(p.Since, now)
	switch {
	case r.Kind.IsRetraction():
		return recent, Swallow
	case !recent:
		*p = Passed{Has: true, Since: now, Order: rowcol.Order{Time: r.Order().Time}}
		return false, 0
	case c.EventTime && KeepFirst.Replaces(r.Order(), p.Order):
		p.Order.Time = r.Order().Time
		return false, 0
	}
	return true, DropDuplicate
}

package core

// Rule 6 of KeepLast, the mini-batch fold: before the shuffle, the keying
// step holds each key's rows of a bundle and passes on only the one that
// decides the key's final state. Worked out against OnLastRow:
//
//   - Arrival order: every +I/+U overwrites the stored row and every -U/-D
//     clears it (or is ignored when nothing is stored), so whatever the
//     key's state, the final state after the bundle is the one its last row
//     leaves. A retraction followed by an insert folds to the insert: the
//     insert replaces the stored row (-U/+U) where the unfolded sequence
//     deletes and re-inserts it (-D/+I), the same final state.
//   - Ordered (OnTime, SequenceBy): the stored ordering value only grows, so
//     the bundle's row that LastReplaces every earlier one (the largest
//     value, ties to the later arrival) is accepted exactly when the
//     unfolded sequence ends with it, and every later row below it is out of
//     order in both. A retraction that wins leaves the same tombstone, and
//     a row identical to the stored one leaves its value stored (OnLastRow's
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
	Time  int64  // the pending row's event time
	Seq   []byte // its SequenceBy value, nil without SequenceBy
	Since int64  // processing time of the group's first row (StateTTL)
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

// SameMiniBatchGroup reports whether a row arriving at processing time now
// may be folded with (KeepLast) or dropped after (KeepFirst) a key's row of
// the same bundle that arrived at since: always without StateTTL, else
// within TTL/RefreshFraction, so that no expiry decision moves by more than
// the refresh throttle already allows.
func (c Config) SameMiniBatchGroup(since, now int64) bool {
	return c.StateTTL == 0 || now-since < max(c.StateTTL/RefreshFraction, 1)
}

// FoldLastRow decides on row r of a key arriving at the fold at processing
// time now, with the key's pending row p, updating p in place (its Seq is
// copied). r.Row is not read. Only Ordered and StateTTL of c matter.
func (c Config) FoldLastRow(p *Fold, r LastRow, now int64) FoldAction {
	hold := func() {
		p.Has, p.Time, p.Seq = true, r.Time, append(p.Seq[:0], r.Seq...)
		if r.Seq == nil {
			p.Seq = nil
		}
	}
	switch {
	case !p.Has:
		hold()
		p.Since = now
		return FoldHold
	case !c.SameMiniBatchGroup(p.Since, now):
		hold()
		p.Since = now
		return FoldFlush
	case c.Ordered && !LastReplaces(r.Seq, r.Time, p.Seq, p.Time):
		return FoldDrop
	}
	hold()
	return FoldReplace
}

package statecoder

import (
	"errors"
	"fmt"
	"slices"
)

// Marks are the persisted form of KeepFirst's watermarkless state (version
// 3): a bag of int64 marks, each one fact about an emitted key. A new key
// costs one blind append of one mark (Beam writes an int64 in one write, so
// one Fn API request), where a value state of bytes costs a clear and two
// appends; a refreshed retention is one more append.
//
// A mark is value<<3 | tag, the value signed:
//
//	tag 0  seen       Phase = Emitted                          (value 0)
//	tag 1  expire at  Phase = Emitted, ExpireAt = the largest value
//	tag 2  max event  Phase = Emitted, MaxEvent = the largest value
//	tags 3-7 reserved for later layouts; FoldMarks reports ErrCorrupt
//
// The marks of a key say the same in any order (Beam does not promise a
// bag's order): each field is the largest of its marks. A change that is
// not an increase (a new period after expiry may lower MaxEvent) rewrites
// the bag. Event-time KeepFirst, whose state holds a candidate row, and
// KeepLast keep versions instead (versions.go).
const (
	markSeen = iota
	markExpireAt
	markMaxEvent
	markReserved
)

const markTagBits = 3

// MaxMarks bounds a key's marks: a change that would make more of them
// rewrites the bag (a clear, then the marks of the state) instead.
const MaxMarks = 8

// errNotMarks: the state holds more than marks can say.
var errNotMarks = errors.New("statecoder: only an emitted key's seen marker, expiry and largest event time are marks")

func mark(tag int, v int64) (int64, error) {
	m := v<<markTagBits | int64(tag)
	if m>>markTagBits != v {
		return 0, fmt.Errorf("statecoder: %d does not fit in a mark", v)
	}
	return m, nil
}

// FoldMarks returns the state that marks build.
func FoldMarks(marks []int64) (State, error) {
	var st State
	var hasExpire, hasMax bool
	for _, m := range marks {
		v := m >> markTagBits
		st.Phase = Emitted
		switch m & (1<<markTagBits - 1) {
		case markSeen:
			if v != 0 {
				return State{}, fmt.Errorf("%w: seen mark with value %d", ErrCorrupt, v)
			}
		case markExpireAt:
			if !hasExpire || v > st.ExpireAt {
				st.ExpireAt, hasExpire = v, true
			}
		case markMaxEvent:
			if !hasMax || v > st.MaxEvent {
				st.MaxEvent, hasMax = v, true
			}
		default:
			return State{}, fmt.Errorf("%w: mark %#x of an unknown kind (written by a newer beamdedup?)", ErrCorrupt, m)
		}
	}
	return st, nil
}

// Marks returns the marks of st: none for an absent state, else a mark for
// each of its non-zero fields, or a seen marker.
func Marks(st *State) ([]int64, error) {
	switch {
	case st.Phase == None:
		return nil, nil
	case st.Phase != Emitted || st.CandTime != 0 || st.CleanupAt != 0 || st.Rearms != 0 || st.Micros != 0 || len(st.Cand) != 0 || len(st.Seq) != 0:
		return nil, errNotMarks
	}
	var marks []int64
	for _, f := range []struct {
		tag int
		v   int64
	}{{markExpireAt, st.ExpireAt}, {markMaxEvent, st.MaxEvent}} {
		if f.v == 0 {
			continue
		}
		m, err := mark(f.tag, f.v)
		if err != nil {
			return nil, err
		}
		marks = append(marks, m)
	}
	if len(marks) == 0 {
		marks = append(marks, markSeen)
	}
	return marks, nil
}

// MarkChanges returns how to change a key's stored marks (they fold to
// old) so that they fold to new: clear them first (new is absent, or the
// bag is rewritten), then append add. A change is appended while the bag
// stays within MaxMarks and says new; otherwise the bag is rewritten with
// new's marks.
func MarkChanges(stored []int64, old, new *State) (clear bool, add []int64, err error) {
	if new.Phase == None {
		return len(stored) > 0, nil, nil
	}
	all, err := Marks(new)
	if err != nil {
		return false, nil, err
	}
	if len(stored) > 0 {
		// The marks of the fields that changed.
		var delta []int64
		for _, m := range all {
			v := m >> markTagBits
			switch m & (1<<markTagBits - 1) {
			case markExpireAt:
				if v != old.ExpireAt {
					delta = append(delta, m)
				}
			case markMaxEvent:
				if v != old.MaxEvent {
					delta = append(delta, m)
				}
			}
		}
		if len(stored)+len(delta) <= MaxMarks {
			folded, err := FoldMarks(slices.Concat(stored, delta))
			if err == nil && folded.Equal(new) {
				return false, delta, nil
			}
		}
	}
	return len(stored) > 0, all, nil
}

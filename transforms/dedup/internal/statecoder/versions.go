package statecoder

import (
	"encoding/binary"
	"fmt"
)

// Versions are the persisted form of KeepLast's state and of event-time
// KeepFirst's (whose candidate row rides in the state): a bag of versions
// of the key's state, the newest of them current. A change appends a new
// version, with no clear: two Fn API requests, as Beam writes a byte
// slice's length and its bytes apart, where a value state's write is a
// clear and those two. MaxVersions bounds the bag, so a key holds at most
// that many copies of its row.
//
// A version is
//
//	uvarint n        its position in the bag (0 after the bag was cleared)
//	bytes            the state's encoding (Encode: version 1, 2 with a SequenceBy value, 4 with a time's microseconds)
//
// The current state is the version with the largest n, so the bag says the
// same in any order (Beam does not promise a bag's order).

// MaxVersions bounds a key's versions: the change that would add one more
// rewrites the bag (a clear, then the new state) instead.
const MaxVersions = 8

// LastVersion decodes the current state of a key's versions: the newest
// one, or the absent state when there are none. Cand and Seq alias the
// version's bytes.
func LastVersion(versions [][]byte) (State, error) {
	var st State
	best, newest := -1, uint64(0)
	for i, v := range versions {
		n, k := binary.Uvarint(v)
		if k <= 0 {
			return State{}, fmt.Errorf("%w: version without a position", ErrCorrupt)
		}
		if best < 0 || n > newest {
			best, newest = i, n
		}
	}
	if best < 0 {
		return st, nil
	}
	_, k := binary.Uvarint(versions[best])
	err := Decode(versions[best][k:], &st)
	return st, err
}

// VersionChanges returns how to change a key's n stored versions so that
// the current one is new: clear them first (new is absent, or the bag is
// full), then append add, new's version (nil when new is absent).
func VersionChanges(n int, new *State) (clear bool, add []byte) {
	if new.Phase == None {
		return n > 0, nil
	}
	clear = n >= MaxVersions
	if clear {
		n = 0
	}
	return clear, Append(binary.AppendUvarint(nil, uint64(n)), new)
}

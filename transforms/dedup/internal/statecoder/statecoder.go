// Package statecoder is one key's deduplication state (State) and its
// persisted forms. The state type lives here, below the rules that decide
// on it (dedup/internal/core names it core.State) and the step that keeps
// it (dedup/internal/step); nothing outside package dedup reads it.
//
// State outlives binaries: a pipeline updated on Dataflow or restored from a
// Flink savepoint reads state written by an older version of this library.
// So the formats are versioned, every version ever written stays decodable,
// and golden-byte tests pin each version.
//
// Each persisted form is chosen for the fewest Fn API state requests, the
// cost of a stateful step on a portable runner (docs/state.md):
//
//   - KeepFirst keeps a bag of int64 marks (version 3, marks.go): a new key
//     is one append.
//   - KeepLast keeps a bag of encoded states (versions.go), each in the
//     byte format below: a change is one append of the new state.
//
// Version 1 layout:
//
//	byte    version (1)
//	byte    phase (0 none, 1 pending, 2 emitted)
//	byte    presence flags: 1 ExpireAt, 2 MaxEvent, 4 CandTime, 8 CleanupAt, 16 Rearms, 32 Cand
//	varint  ExpireAt, MaxEvent, CandTime, CleanupAt (zig-zag), each if flagged
//	byte    Rearms, if flagged
//	uvarint length, then the bytes of Cand, if flagged
//
// Zero fields are omitted, so a watermarkless seen-marker without TTL is
// 3 bytes.
//
// Version 2 (KeepLast with SequenceBy) is version 1 with one more flag:
//
//	flags   64 Seq
//	uvarint length, then the bytes of Seq, if flagged (after Cand)
//
// Encode writes version 1 whenever Seq is empty, so KeepFirst's state and
// KeepLast's without SequenceBy keep the version-1 bytes.
//
// Version 4 (a candidate's, or a stored row's, time to the microsecond) is
// version 2 with one more flag:
//
//	flags   128 Micros
//	uvarint Micros, if flagged (after Rearms, before Cand)
//
// Encode writes version 4 only when Micros is not 0, so a state whose time
// is a whole millisecond (every state of an int64 OnTime column, every
// state written before version 4) keeps the bytes of version 1 or 2, and a
// state of those versions decodes with Micros 0. (Version 3 is the marks,
// which are no byte format: marks.go.)
package statecoder

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// Phase is where a key is in its deduplication period.
type Phase uint8

// Phases of a key.
const (
	// None: no state (never seen, expired or cleaned up).
	None Phase = iota
	// Pending: event-time mode only; a candidate waits for the watermark.
	Pending
	// Emitted: the key's row was emitted; later rows are dropped until expiry.
	Emitted
)

// State is one key's deduplication state. The rules that read and write it
// are in transforms/dedup/internal/core.
type State struct {
	Phase Phase
	// ExpireAt is the processing time at which an emitted key expires
	// (StateTTL); 0 when no StateTTL applies.
	ExpireAt int64
	// MaxEvent is the largest event time that set or refreshed the
	// key's retention (EventTimeTTL base).
	MaxEvent int64
	// CandTime is the event time of the pending candidate, or of the
	// emitted row in event-time mode.
	CandTime int64
	// CleanupAt and Rearms were the schedule of a self-re-arming cleanup
	// timer (event-time mode with StateTTL) that earlier builds wrote. The
	// rules now derive their one expiry check from ExpireAt and no longer
	// write them; they still decode, and are ignored.
	CleanupAt int64
	Rearms    uint8
	// Micros are the microseconds past CandTime's millisecond (0 to 999)
	// of the candidate's, or the stored row's, OnTime value: rows compare
	// to the microsecond (rowcol.Order), while CandTime, a Beam timestamp,
	// is whole milliseconds.
	Micros uint16
	// Cand is the pending candidate row (KeepFirst) or the stored last row
	// (KeepLast), encoded by the adapter. The core never looks inside.
	Cand []byte
	// Seq is the stored row's SequenceBy value (coders/ordercoder), KeepLast
	// only; nil without SequenceBy.
	Seq []byte
}

// Equal reports whether s and o hold the same state (and so encode to the
// same bytes). Keep it in step with the fields above.
func (s *State) Equal(o *State) bool {
	return s.Phase == o.Phase && s.ExpireAt == o.ExpireAt && s.MaxEvent == o.MaxEvent &&
		s.CandTime == o.CandTime && s.CleanupAt == o.CleanupAt && s.Rearms == o.Rearms && s.Micros == o.Micros &&
		bytes.Equal(s.Cand, o.Cand) && bytes.Equal(s.Seq, o.Seq)
}

// Version is the newest format Append and Encode write (they write the
// oldest version that holds the state: 1 without Seq and Micros, 2 with a
// Seq).
const Version byte = 4

const (
	fExpireAt = 1 << iota
	fMaxEvent
	fCandTime
	fCleanupAt
	fRearms
	fCand
	fSeq
	fMicros
	fAllV1 = fExpireAt | fMaxEvent | fCandTime | fCleanupAt | fRearms | fCand
	fAllV2 = fAllV1 | fSeq
	fAllV4 = fAllV2 | fMicros
)

// Append appends the encoding of st to dst.
func Append(dst []byte, st *State) []byte {
	var flags byte
	if st.ExpireAt != 0 {
		flags |= fExpireAt
	}
	if st.MaxEvent != 0 {
		flags |= fMaxEvent
	}
	if st.CandTime != 0 {
		flags |= fCandTime
	}
	if st.CleanupAt != 0 {
		flags |= fCleanupAt
	}
	if st.Rearms != 0 {
		flags |= fRearms
	}
	if len(st.Cand) != 0 {
		flags |= fCand
	}
	version := byte(1)
	if len(st.Seq) != 0 {
		flags |= fSeq
		version = 2
	}
	if st.Micros != 0 {
		flags |= fMicros
		version = 4
	}
	dst = append(dst, version, byte(st.Phase), flags)
	for _, f := range [...]struct {
		bit byte
		v   int64
	}{{fExpireAt, st.ExpireAt}, {fMaxEvent, st.MaxEvent}, {fCandTime, st.CandTime}, {fCleanupAt, st.CleanupAt}} {
		if flags&f.bit != 0 {
			dst = binary.AppendVarint(dst, f.v)
		}
	}
	if flags&fRearms != 0 {
		dst = append(dst, st.Rearms)
	}
	if flags&fMicros != 0 {
		dst = binary.AppendUvarint(dst, uint64(st.Micros))
	}
	if flags&fCand != 0 {
		dst = binary.AppendUvarint(dst, uint64(len(st.Cand)))
		dst = append(dst, st.Cand...)
	}
	if flags&fSeq != 0 {
		dst = binary.AppendUvarint(dst, uint64(len(st.Seq)))
		dst = append(dst, st.Seq...)
	}
	return dst
}

// Encode returns the encoding of st.
func Encode(st *State) []byte { return Append(nil, st) }

// ErrCorrupt reports state bytes that no version of this library wrote.
var ErrCorrupt = errors.New("statecoder: corrupt state")

// Decode reads state bytes of any known version into st. Empty input is
// the absent state (None). Cand and Seq alias b.
func Decode(b []byte, st *State) error {
	*st = State{}
	if len(b) == 0 {
		return nil
	}
	switch b[0] {
	case 1:
		return decode(b[1:], fAllV1, st)
	case 2:
		return decode(b[1:], fAllV2, st)
	case 4:
		return decode(b[1:], fAllV4, st)
	}
	return fmt.Errorf("%w: unknown version %d (written by a newer beamdedup?)", ErrCorrupt, b[0])
}

// decode reads the body of a version whose flags are allowed.
func decode(b []byte, allowed byte, st *State) error {
	if len(b) < 2 {
		return fmt.Errorf("%w: %d bytes after version", ErrCorrupt, len(b))
	}
	phase, flags := Phase(b[0]), b[1]
	if phase > Emitted || flags&^allowed != 0 {
		return fmt.Errorf("%w: phase %d flags %#x", ErrCorrupt, phase, flags)
	}
	st.Phase = phase
	b = b[2:]
	for _, f := range [...]struct {
		bit byte
		p   *int64
	}{{fExpireAt, &st.ExpireAt}, {fMaxEvent, &st.MaxEvent}, {fCandTime, &st.CandTime}, {fCleanupAt, &st.CleanupAt}} {
		if flags&f.bit == 0 {
			continue
		}
		v, n := binary.Varint(b)
		if n <= 0 {
			return fmt.Errorf("%w: bad varint", ErrCorrupt)
		}
		*f.p, b = v, b[n:]
	}
	if flags&fRearms != 0 {
		if len(b) < 1 {
			return fmt.Errorf("%w: missing rearms", ErrCorrupt)
		}
		st.Rearms, b = b[0], b[1:]
	}
	if flags&fMicros != 0 {
		v, n := binary.Uvarint(b)
		if n <= 0 || v > 999 {
			return fmt.Errorf("%w: bad microseconds", ErrCorrupt)
		}
		st.Micros, b = uint16(v), b[n:]
	}
	for _, f := range [...]struct {
		bit byte
		p   *[]byte
	}{{fCand, &st.Cand}, {fSeq, &st.Seq}} {
		if flags&f.bit == 0 {
			continue
		}
		l, n := binary.Uvarint(b)
		if n <= 0 || l > uint64(len(b)-n) {
			return fmt.Errorf("%w: bad length", ErrCorrupt)
		}
		*f.p, b = b[n:n+int(l)], b[n+int(l):]
	}
	if len(b) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", ErrCorrupt, len(b))
	}
	return nil
}

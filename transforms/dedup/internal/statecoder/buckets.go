package statecoder

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
)

// Buckets are the persisted form of the state kept per key-hash bucket
// (format 5): the states of all the keys whose hash falls in one bucket,
// in one bag of segments, so that a bundle reads a bucket's keys in one
// request and writes what changed in one append. A segment is
//
//	uvarint n        its position in the bag (0 after the bag was rewritten)
//	byte    5        the format
//	uvarint buckets  how many buckets the keys were hashed into
//	entries to the end, each:
//	  uvarint length, then the key's encoded bytes
//	  uvarint length, then the key's state (Encode: version 1, 2 or 4); empty: the key has none
//	  byte    the key's pending timer: 0 none, 1 finalization, 2 cleanup
//	  varint  its time, if it has one
//
// A key's current entry is the one in the segment with the largest
// position, so the bag says the same in any order (Beam does not promise a
// bag's order). A write may take several segments of one position, a key
// in one of them; a rewritten bag holds every live key at position 0. An entry with no state is a key deleted since
// an earlier segment; a rewrite drops it. The bucket count is part of
// every segment because a key's bucket depends on it: state written with
// another count is refused, not misread.

// SegmentFormat is the format byte of a bucket's segment.
const SegmentFormat byte = 5

// The timer kinds of an entry, as persisted.
const (
	NoTimer       byte = 0
	FinalizeTimer byte = 1
	CleanupTimer  byte = 2
)

// Entry is a key's entry in a bucket's segment.
type Entry struct {
	Key []byte
	// State is the key's state, encoded (Append); empty: it has none (a
	// deletion).
	State []byte
	// Timer is the key's pending timer (NoTimer, FinalizeTimer,
	// CleanupTimer), at At.
	Timer byte
	At    int64
}

// AppendSegmentHeader appends the header of a segment at position pos of a
// bucket of buckets to dst; entries follow it (AppendEntry).
func AppendSegmentHeader(dst []byte, pos uint64, buckets int) []byte {
	dst = binary.AppendUvarint(dst, pos)
	dst = append(dst, SegmentFormat)
	return binary.AppendUvarint(dst, uint64(buckets))
}

// AppendEntry appends e to a segment.
func AppendEntry(dst []byte, e *Entry) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(e.Key)))
	dst = append(dst, e.Key...)
	dst = binary.AppendUvarint(dst, uint64(len(e.State)))
	dst = append(dst, e.State...)
	if len(e.State) == 0 {
		return append(dst, NoTimer)
	}
	dst = append(dst, e.Timer)
	if e.Timer != NoTimer {
		dst = binary.AppendVarint(dst, e.At)
	}
	return dst
}

// Held is what a bucket's cell holds: its segments, the position of the
// next one, and the bytes of the segments at position 0 (its last rewrite)
// and after it.
type Held struct {
	Segments    int
	Next        uint64
	Base, Delta int
}

// FoldSegments reads a bucket's segments, of a bucket of buckets, in
// position order, handing each entry to visit: a key's later entry after
// its earlier ones, so that the last one visited is its current one (an
// empty state: the key has none). It refuses segments of another format or
// bucket count. The entries' bytes alias segs.
func FoldSegments(segs [][]byte, buckets int, visit func(e *Entry)) (Held, error) {
	type seg struct {
		pos     uint64
		entries []byte
	}
	var h Held
	parsed := make([]seg, 0, len(segs))
	for _, b := range segs {
		pos, entries, err := splitSegment(b, buckets)
		if err != nil {
			return Held{}, err
		}
		parsed = append(parsed, seg{pos, entries})
		if pos == 0 {
			h.Base += len(b)
		} else {
			h.Delta += len(b)
		}
		h.Next = max(h.Next, pos+1)
	}
	h.Segments = len(segs)
	slices.SortStableFunc(parsed, func(a, b seg) int { return cmp.Compare(a.pos, b.pos) })
	var e Entry
	for _, sg := range parsed {
		for b := sg.entries; len(b) > 0; {
			var err error
			if b, err = nextEntry(b, &e); err != nil {
				return Held{}, err
			}
			visit(&e)
		}
	}
	return h, nil
}

// splitSegment reads a segment's header: its position and its entries.
func splitSegment(seg []byte, buckets int) (pos uint64, entries []byte, err error) {
	pos, k := binary.Uvarint(seg)
	if k <= 0 || len(seg) < k+1 {
		return 0, nil, fmt.Errorf("%w: a bucket segment without a header", ErrCorrupt)
	}
	if f := seg[k]; f != SegmentFormat {
		return 0, nil, fmt.Errorf("%w: a bucket segment of format %d (written by a newer beamdedup?)", ErrCorrupt, f)
	}
	n, j := binary.Uvarint(seg[k+1:])
	if j <= 0 {
		return 0, nil, fmt.Errorf("%w: a bucket segment without its bucket count", ErrCorrupt)
	}
	if n != uint64(buckets) {
		return 0, nil, fmt.Errorf("statecoder: the state was written with its keys in %d buckets, and this step has %d: a running job's bucket count cannot change (drain it and start anew)", n, buckets)
	}
	return pos, seg[k+1+j:], nil
}

// nextEntry decodes the first entry of entries into e and returns the
// rest. e's key and state alias entries.
func nextEntry(entries []byte, e *Entry) (rest []byte, err error) {
	key, rest, ok := LengthPrefixed(entries)
	var st []byte
	if ok {
		st, rest, ok = LengthPrefixed(rest)
	}
	if !ok {
		return nil, fmt.Errorf("%w: a truncated bucket entry", ErrCorrupt)
	}
	*e = Entry{Key: key, State: st}
	if len(rest) < 1 {
		return nil, fmt.Errorf("%w: a bucket entry without its timer", ErrCorrupt)
	}
	e.Timer, rest = rest[0], rest[1:]
	switch e.Timer {
	case NoTimer:
	case FinalizeTimer, CleanupTimer:
		v, k := binary.Varint(rest)
		if k <= 0 {
			return nil, fmt.Errorf("%w: a bucket entry's timer without its time", ErrCorrupt)
		}
		e.At, rest = v, rest[k:]
	default:
		return nil, fmt.Errorf("%w: a bucket entry's timer of an unknown kind %d", ErrCorrupt, e.Timer)
	}
	if len(st) == 0 && e.Timer != NoTimer {
		return nil, fmt.Errorf("%w: a timer on a key without state", ErrCorrupt)
	}
	return rest, nil
}

// LengthPrefixed splits b's first field, a uvarint length then that many
// bytes, from the rest; ok is false if b holds no whole field. The field
// aliases b, its capacity its length.
func LengthPrefixed(b []byte) (field, rest []byte, ok bool) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return nil, nil, false
	}
	end := k + int(n)
	return b[k:end:end], b[end:], true
}

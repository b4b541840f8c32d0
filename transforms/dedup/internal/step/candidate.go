package step

import (
	"encoding/binary"
	"fmt"

	"github.com/beamdedup/beamdedup/transforms/dedup/internal/core"
)

// Candidate is the merge's accumulator (core.Candidate), with its own
// coder (EncodeCandidate, DecodeCandidate).
type Candidate = core.Candidate

type candidate = Candidate

// candidate's coder (merge.go has the merge it serves).

// Flags of the candidate's first byte.
const (
	candHas = 1 << iota
	candSeq
	candRetract
	candMicros
	candStamped
)

// EncodeCandidate and DecodeCandidate are candidate's coder: the lifted
// combine re-encodes accumulators, and Beam's reflective row coder cost 6%
// of the bounded expansion's CPU (notes/performance.md). Layout: a flags
// byte (Has, Seq, Retract, Micros, Stamped), varints TS, Rows,
// Retractions, then (if flagged) uvarint Micros, then (if flagged) uvarint
// length and Seq, then the Row to the end. Candidates are never in a
// stateful step's state, but a runner keeps a streaming window's
// accumulators in its own: so the layout only grows, a flag at a time
// (Micros and Stamped came last; Micros is written only when not 0), and
// every layout written stays readable.
func EncodeCandidate(c candidate) []byte {
	return appendCandidate(make([]byte, 0, 1+5*binary.MaxVarintLen64+len(c.Seq)+len(c.Row)), c)
}

// appendCandidate appends c's encoding (EncodeCandidate) to b.
func appendCandidate(b []byte, c candidate) []byte {
	var flags byte
	if c.Has {
		flags |= candHas
	}
	if c.Seq != nil {
		flags |= candSeq
	}
	if c.Retract {
		flags |= candRetract
	}
	if c.Micros != 0 {
		flags |= candMicros
	}
	if c.Stamped {
		flags |= candStamped
	}
	b = append(b, flags)
	b = binary.AppendVarint(b, c.TS)
	b = binary.AppendVarint(b, c.Rows)
	b = binary.AppendVarint(b, c.Retractions)
	if c.Micros != 0 {
		b = binary.AppendUvarint(b, uint64(c.Micros))
	}
	if c.Seq != nil {
		b = binary.AppendUvarint(b, uint64(len(c.Seq)))
		b = append(b, c.Seq...)
	}
	return append(b, c.Row...)
}

func DecodeCandidate(b []byte) (candidate, error) {
	if len(b) < 1 || b[0]&^(candHas|candSeq|candRetract|candMicros|candStamped) != 0 {
		return candidate{}, fmt.Errorf("dedup: corrupt candidate")
	}
	c := candidate{Has: b[0]&candHas != 0, Retract: b[0]&candRetract != 0, Stamped: b[0]&candStamped != 0}
	seq, micros := b[0]&candSeq != 0, b[0]&candMicros != 0
	b = b[1:]
	for _, p := range []*int64{&c.TS, &c.Rows, &c.Retractions} {
		v, n := binary.Varint(b)
		if n <= 0 {
			return candidate{}, fmt.Errorf("dedup: corrupt candidate")
		}
		*p, b = v, b[n:]
	}
	if micros {
		v, n := binary.Uvarint(b)
		if n <= 0 || v > 999 {
			return candidate{}, fmt.Errorf("dedup: corrupt candidate")
		}
		c.Micros, b = uint16(v), b[n:]
	}
	if seq {
		l, n := binary.Uvarint(b)
		if n <= 0 || l > uint64(len(b)-n) {
			return candidate{}, fmt.Errorf("dedup: corrupt candidate")
		}
		c.Seq, b = b[n:n+int(l):n+int(l)], b[n+int(l):]
	}
	if len(b) > 0 {
		c.Row = b
	}
	return c, nil
}

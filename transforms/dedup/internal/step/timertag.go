package step

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strings"
)

// The timer-tag codec: an event-time candidate's timer carries the
// candidate, so that its firing needs no state read (step.go).

// maxTagCandidate is the largest encoded candidate carried in a timer tag;
// a larger one waits in state only, and its firing reads it from there.
const maxTagCandidate = 1024

// candidateTag is the timer tag that carries a candidate: its event time,
// how many versions its key's state cell held once the candidate was
// written (so that the firing's write needs no read), and its encoded row,
// base64 so that runners holding tags as UTF-8 strings keep them intact.
// It is "" (the untagged timer) for a candidate too large, and for one at
// time 0: that is the hold of a cleared timer, which the Go SDK sends after
// firing a timer inline and Prism may fire (notes/beam-defects.md), so only
// the state could tell such a firing from a live one.
func candidateTag(at int64, held int, cand []byte) string {
	if len(cand) > maxTagCandidate || at == 0 {
		return ""
	}
	b := binary.BigEndian.AppendUint64(make([]byte, 0, 8+binary.MaxVarintLen64+len(cand)), uint64(at))
	b = binary.AppendUvarint(b, uint64(held))
	return "c" + base64.RawURLEncoding.EncodeToString(append(b, cand...))
}

// parseCandidateTag reverses candidateTag.
func parseCandidateTag(tag string) (at int64, held int, cand []byte, err error) {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(tag, "c"))
	if err != nil || !strings.HasPrefix(tag, "c") || len(b) < 9 {
		return 0, 0, nil, fmt.Errorf("dedup: malformed timer tag %q", tag)
	}
	n, k := binary.Uvarint(b[8:])
	if k <= 0 {
		return 0, 0, nil, fmt.Errorf("dedup: malformed timer tag %q", tag)
	}
	return int64(binary.BigEndian.Uint64(b)), int(n), b[8+k:], nil
}

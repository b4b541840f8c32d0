package kafkaio

import (
	"slices"
	"time"
)

// ledger is a partition's safe offsets: every offset below base, and the
// sorted, disjoint spans above it.
type ledger struct {
	base  int64
	spans []span

	moved time.Time // when base last moved (or the ledger began)
	held  time.Time // since when its reader is held at MaxInFlight; zero: it is not
}

type span struct{ from, to int64 } // [from, to)

// markSafe adds [from, to) and moves base over the spans it now reaches.
func (l *ledger) markSafe(from, to int64) {
	from = max(from, l.base)
	if from >= to {
		return
	}
	i, _ := slices.BinarySearchFunc(l.spans, from, func(s span, x int64) int {
		switch {
		case s.to < x:
			return -1
		case s.from > x:
			return 1
		}
		return 0
	})
	// Merge with every span [from, to) touches, from i on.
	j := i
	for j < len(l.spans) && l.spans[j].from <= to {
		from, to = min(from, l.spans[j].from), max(to, l.spans[j].to)
		j++
	}
	l.spans = slices.Replace(l.spans, i, j, span{from, to})
	before := l.base
	for len(l.spans) > 0 && l.spans[0].from <= l.base {
		l.base = max(l.base, l.spans[0].to)
		l.spans = l.spans[1:]
	}
	if l.base != before {
		l.moved = time.Now()
	}
}

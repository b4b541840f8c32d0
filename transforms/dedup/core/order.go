package core

import (
	"bytes"
	"cmp"
)

// The one ordering of a key's rows. Every expansion decides with it which
// row is a key's first or last: the stateful rules (First's earliest
// candidate, Last's replacement), KeepLast's mini-batch fold, the bounded
// merge and window dedup's combine.
//
// Rows are ranked by their SequenceBy value (ordercoder bytes; nil without
// SequenceBy), then by event time. A tie goes by arrival: KeepFirst keeps
// the earlier row, KeepLast takes the later one. Where rows are merged
// without an arrival order (bounded input, window dedup), a stand-in takes
// its place, so that every run keeps the same row: a -U/-D ranks before a
// +I/+U of the same instant (in a changelog the -U of an update arrives
// before its +U), then the smaller encoded row before the larger.

// Order is a row's place in its key's order, arrival aside.
type Order struct {
	Seq  []byte
	Time int64
}

// Compare orders a and b by SequenceBy value, then event time; 0 is a tie.
func (a Order) Compare(b Order) int {
	if c := bytes.Compare(a.Seq, b.Seq); c != 0 {
		return c
	}
	return cmp.Compare(a.Time, b.Time)
}

// Direction is which end of the order a deduplication keeps.
type Direction uint8

// Directions.
const (
	KeepFirst Direction = iota // the smallest
	KeepLast                   // the largest
)

// Replaces reports whether a row arriving with order arriving replaces the
// kept one, kept, in a stream: KeepFirst takes a strictly earlier row (a
// tie keeps the earlier arrival), KeepLast a row no earlier (a tie goes to
// the later arrival, as in Flink's keep-last).
func (d Direction) Replaces(arriving, kept Order) bool {
	c := arriving.Compare(kept)
	if d == KeepLast {
		return c >= 0
	}
	return c < 0
}

// Prefers reports whether a row that compares c (a Compare result: the
// row against the kept one) replaces the kept one where there is no
// arrival order to break a tie: c is never 0 there but for equal rows.
func (d Direction) Prefers(c int) bool {
	if d == KeepLast {
		return c > 0
	}
	return c < 0
}

// Rank is a merged row's place in its key's order: its Order, then the
// arrival stand-in's first part (a retraction ranks before an insertion).
type Rank struct {
	Order
	Retraction bool
}

// Compare orders a and b by Order, then a retraction before an insertion;
// 0 is a tie, which the encoded rows break (CompareMerged).
func (a Rank) Compare(b Rank) int {
	if c := a.Order.Compare(b.Order); c != 0 {
		return c
	}
	switch {
	case a.Retraction == b.Retraction:
		return 0
	case a.Retraction:
		return -1
	}
	return 1
}

// Candidate is a merge's accumulator: the row it keeps so far and the
// counts of the rows merged into it.
type Candidate struct {
	Has         bool   // a row is kept (a +I/+U row; with KeepLast, a -U/-D too)
	Retract     bool   // the kept row is a -U/-D (KeepLast: the key ends deleted)
	TS          int64  // its event time, Unix ms
	Seq         []byte // its SequenceBy value; nil without SequenceBy
	Row         []byte // its encoding
	Rows        int64  // +I/+U rows merged
	Retractions int64  // -U/-D rows merged
}

// Rank is the kept row's rank.
func (m Candidate) Rank() Rank {
	return Rank{Order: Order{Seq: m.Seq, Time: m.TS}, Retraction: m.Retract}
}

// CompareMerged orders the kept rows of a and b (both Has): by Rank, then
// by encoded row, the complete order of a merge.
func CompareMerged(a, b Candidate) int {
	if c := a.Rank().Compare(b.Rank()); c != 0 {
		return c
	}
	return bytes.Compare(a.Row, b.Row)
}

// One is the candidate of a single row: with KeepFirst a retraction is
// only counted (it never becomes a key's first row); otherwise the row
// competes. seq and row are kept, not copied.
func (d Direction) One(et int64, seq []byte, retraction bool, row []byte) Candidate {
	switch {
	case retraction && d == KeepFirst:
		return Candidate{Retractions: 1}
	case retraction:
		return Candidate{Has: true, Retract: true, TS: et, Seq: seq, Row: row, Retractions: 1}
	}
	return Candidate{Has: true, TS: et, Seq: seq, Row: row, Rows: 1}
}

// Keeps reports whether Merge(a, b) keeps b's row rather than a's.
func (d Direction) Keeps(a, b Candidate) bool {
	return !a.Has || b.Has && d.Prefers(CompareMerged(b, a))
}

// Merge keeps the kept row of a or b that d prefers by CompareMerged and
// adds up the counts. It is commutative and associative, as a combine
// needs.
func (d Direction) Merge(a, b Candidate) Candidate {
	keep := a
	if d.Keeps(a, b) {
		keep = b
	}
	keep.Rows = a.Rows + b.Rows
	keep.Retractions = a.Retractions + b.Retractions
	return keep
}

// Settlement is what became of a key's merged rows: whether the kept row is
// emitted, and how many rows had each outcome.
type Settlement struct {
	Emit   bool
	Counts [NumOutcomes]int64
}

func (s *Settlement) add(o Outcome, n int64) { s.Counts[o] += n }

package core

import (
	"github.com/beamdedup/beamdedup/internal/micros"
	"github.com/beamdedup/beamdedup/internal/rowcol"
	"github.com/beamdedup/beamdedup/transforms/rowkind"
)

// Which row of a key is its first or last is rowspec's comparator
// (rowcol.Order and its tie rules): every expansion decides with it, the
// stateful rules (First's earliest candidate, Last's replacement),
// KeepLast's mini-batch fold, the bounded merge and window dedup's combine,
// as pgsink does in its fold and its guard. A Direction is which end of the
// order a deduplication keeps; where rows arrive one after another a tie
// goes by arrival (Replaces), where they are merged without an arrival order
// the encoded rows stand in for it (Merge).

// Direction is which end of the order a deduplication keeps.
type Direction uint8

// Directions.
const (
	KeepFirst Direction = iota // the smallest
	KeepLast                   // the largest
)

// Replaces reports whether a row arriving with order arriving replaces the
// kept one, kept, in a stream: KeepFirst takes a strictly earlier row (a
// tie keeps the earlier arrival, rowcol.Earlier), KeepLast a row no
// earlier (a tie goes to the later arrival, rowcol.Later).
func (d Direction) Replaces(arriving, kept rowcol.Order) bool {
	if d == KeepLast {
		return rowcol.Later(arriving, kept)
	}
	return rowcol.Earlier(arriving, kept)
}

// Prefers reports whether a row that compares c (a rowcol.CompareRows
// result: the row against the kept one) replaces the kept one where there
// is no arrival order: c is 0 only for equal rows, which keep the kept one.
func (d Direction) Prefers(c int) bool {
	if d == KeepLast {
		return c > 0
	}
	return c < 0
}

// Candidate is a merge's accumulator: the row it keeps so far and the
// counts of the rows merged into it.
type Candidate struct {
	Has     bool   // a row is kept (a +I/+U row; with KeepLast, a -U/-D too)
	Retract bool   // the kept row is a -U/-D (KeepLast: the key ends deleted)
	TS      int64  // its event time, Unix ms (its timestamp)
	Micros  uint16 // the microseconds of its OnTime value past TS (0 to 999)
	Stamped bool   // TS is its timestamp, not an OnTime value (Row.Stamped)
	Seq     []byte // its SequenceBy value; nil without SequenceBy
	Row     []byte // its encoding
	// Rows and Retractions count the +I/+U and the -U/-D rows merged.
	Rows, Retractions int64
}

// Order is the kept row's place in its key's order.
func (m Candidate) Order() rowcol.Order {
	return rowcol.Order{Seq: m.Seq, Time: micros.Of(m.TS, m.Micros), Stamped: m.Stamped, Retraction: m.Retract}
}

// CompareMerged orders the kept rows of a and b (both Has) where there is
// no arrival order (rowcol.CompareRows): by Order, then by encoded row.
func CompareMerged(a, b Candidate) int {
	return rowcol.CompareRows(a.Order(), a.Row, b.Order(), b.Row)
}

// One is the candidate of a single row r (its Order from r.Order): with
// KeepFirst a retraction is only counted (it never becomes a key's first
// row); otherwise the row competes. r.Seq and r.Row are kept, not copied.
func (d Direction) One(r Row) Candidate {
	retraction := r.Kind.IsRetraction()
	switch {
	case retraction && d == KeepFirst:
		return Candidate{Retractions: 1}
	case retraction:
		return Candidate{Has: true, Retract: true, TS: r.Time, Micros: r.Micros, Stamped: r.Stamped, Seq: r.Seq, Row: r.Row, Retractions: 1}
	}
	return Candidate{Has: true, TS: r.Time, Micros: r.Micros, Stamped: r.Stamped, Seq: r.Seq, Row: r.Row, Rows: 1}
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
// emitted (and as which kind), and how many rows had each outcome.
type Settlement struct {
	Emit   bool
	Kind   rowkind.Kind
	Counts [NumOutcomes]int64
}

func (s *Settlement) add(o Outcome, n int64) { s.Counts[o] += n }

package rowcol

import (
	"bytes"
	"cmp"
)

// The comparator: which of a key's rows wins, for every transform and the
// sink. The stateful step (KeepFirst's candidate, KeepLast's stored row),
// KeepLast's mini-batch fold, the bounded merge, window dedup's combine,
// pgsink's batch fold and its SQL guard, and changelog.Latest all decide
// with Order and the tie rules below, and nothing else.
//
// A row's order is its SequenceBy value, then its OnTime value (a time to
// the microsecond, an int64 column to the millisecond; a transform without
// OnTime orders by the row's timestamp instead, which the sink does not
// see), then its kind: a retraction (-U, -D) ranks after a live row (+I,
// +U) of the same value. A -U/-D carries the value of the row it retracts,
// so at that value it is the row's end, in whatever order the two arrive:
// a live row as old as a deletion does not bring its key back, in a stream
// or in the table. Rows that have no value at all (no SequenceBy, and
// their timestamps for time: KeepLast without an ordering column, on
// bounded input) rank a retraction before a live row of the same
// timestamp instead, as in a changelog the -U of an update comes before
// its +U.
//
// Two rows of equal order (the same value, both live or both retractions)
// are a tie, broken by one of three rules:
//
//   - where rows arrive one after another (the stateful step, the fold,
//     the sink), by arrival: where the last row is kept the later arrival
//     wins (Later, as Flink's keep-last), where the first is kept the
//     earlier one stays (Earlier);
//   - where they do not (a merge: bounded input, window dedup, a combine),
//     by the encoded rows, which stand in for arrival so that every run
//     keeps the same row: the larger where the last row is kept, the
//     smaller where the first is (CompareRows);
//   - equal rows (equal order and equal in every column but the kind) are
//     one row: whichever is kept, nothing changes, so KeepLast drops the
//     second as a duplicate and the sink does not rewrite it.

// Order is a row's place in its key's order.
type Order struct {
	// Seq is the SequenceBy value (SeqColumn's bytes); nil without
	// SequenceBy.
	Seq []byte
	// Time is the OnTime value in Unix microseconds (TimeColumn.Read); a
	// transform without OnTime puts the row's timestamp there (Stamped).
	Time int64
	// Stamped: Time is the row's timestamp, not an OnTime value.
	Stamped bool
	// Retraction: the row is a -U or a -D.
	Retraction bool
}

// Compare orders a and b by SequenceBy value, then time, then kind (a live
// row before a retraction of its value; a retraction first where the rows
// have no value, Stamped and without a SequenceBy value); 0 is a tie. a and
// b are rows of one transform, so both Stamped or neither.
func (a Order) Compare(b Order) int {
	if c := bytes.Compare(a.Seq, b.Seq); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Time, b.Time); c != 0 {
		return c
	}
	if a.Retraction == b.Retraction {
		return 0
	}
	after := 1 // a retraction after a live row of its value
	if a.Stamped && a.Seq == nil {
		after = -1 // no value: the -U of an update before its +U
	}
	if a.Retraction {
		return after
	}
	return -after
}

// Later reports whether a row arriving with order arriving replaces the
// kept row, of order kept, where the last row is kept: a row no earlier,
// a tie going to the later arrival.
func Later(arriving, kept Order) bool { return arriving.Compare(kept) >= 0 }

// Earlier reports whether a row arriving with order arriving replaces the
// kept row where the first row is kept: a strictly earlier row, a tie
// keeping the earlier arrival.
func Earlier(arriving, kept Order) bool { return arriving.Compare(kept) < 0 }

// CompareRows orders two rows where there is no arrival order: by Order,
// then by their encodings (rowA and rowB, in one encoding of the row type),
// so that 0 means equal rows.
func CompareRows(a Order, rowA []byte, b Order, rowB []byte) int {
	if c := a.Compare(b); c != 0 {
		return c
	}
	return bytes.Compare(rowA, rowB)
}

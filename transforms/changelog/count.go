package changelog

import (
	"context"
	"fmt"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/timers"

	"github.com/beamdedup/beamdedup/coders/ordercoder"
	"github.com/beamdedup/beamdedup/internal/rowcol"
	"github.com/beamdedup/beamdedup/transforms/changelog/internal/count"
	"github.com/beamdedup/beamdedup/transforms/internal/pcol"
	"github.com/beamdedup/beamdedup/transforms/internal/prismwarn"
)

// GroupCount is one output row of CountPerKey: a group and its count.
type GroupCount struct {
	// Group is the group's values: the value of a single GroupBy column as
	// text (NULL for a nil pointer), or a JSON array of the values of
	// several; "" without GroupBy. The groups are counted apart, but a nil
	// *string and the string "NULL" give the same text: where a column
	// holds both, group by it and another column (a JSON array tells null
	// from "NULL") before keying a sink or Latest by Group.
	Group string `json:"group" beam:"group"`
	// Count is the group's +I/+U rows less its -U/-D rows.
	Count int64 `json:"count" beam:"count"`
	// Version is the number of changes applied to the group so far: an
	// upsert sink keeps the row with the highest Version, so a reordered
	// write cannot replace a newer count with an older one. A group's final
	// row is the same in both expansions, in whatever order its changes
	// arrived (without Spec's key; with it, see Spec).
	Version int64 `json:"version" beam:"version"`
}

// Result is what CountPerKey returns.
type Result struct {
	// Counts are GroupCount rows: on a stream the group's new count after
	// every change, on bounded input one total per group.
	Counts beam.PCollection
	// DeadLetters are deadletter.DeadLetter rows with the reason: a row of
	// an unknown kind (not applied), and a group whose count ends below
	// zero (one for the group, its GroupCount as the row).
	DeadLetters beam.PCollection
}

// CountPerKey applies a changelog of rows (a PCollection of a struct type
// with a kind column) to a count per group: +I and +U add one to the row's
// group, -U and -D subtract one.
//
// A count is a sum, so the result does not depend on the order in which
// the changes arrive: a -U may reach its group before the +I it retracts
// (after a shuffle, or on a runner that hands a key's rows over in no
// particular order, such as Flink in batch mode) and the count still ends
// right.
//
// It reads the rows' roles (package rowspec): the kind column
// (rowspec.KindColumn), which it needs, and the key (rowspec.PartitionBy),
// with which a retraction on bounded input is matched with its key's own
// rows: a -U/-D that outnumbers them retracts a row the input never added
// (the -D with which bounded KeepLast ends a key that ends deleted, the
// start of a history cut mid-way) and is ignored (retractions_ignored)
// instead of taking its group's count down. A count needs no order:
// OnTime and SequenceBy are ignored, so a KeepLast Result's Spec is taken
// as it is; upserts (rowspec.Upsert), which retract nothing, are refused.
//
// On a stream (unbounded input) it keeps one count per group (and window)
// in value state and emits the group's new count after every change: an
// upsert stream of GroupCount by Group, whose last row per group is its
// current count (Latest reduces it to that). The count may go below zero
// on the way (a retraction that overtook its insertion); a count below
// zero is not emitted, and the next change that takes it back to zero or
// above emits it with a Version that counts every change applied. A group
// still below zero when its window ends (for the global window, at the end
// of the input) retracted rows the count never saw: it is one dead letter,
// as on bounded input. On bounded input it is a combine per group: one
// GroupCount per group with its total, and a group whose total is
// negative is one dead letter instead; given the rows' key (Spec), a
// retraction of a row the input never added is ignored instead.
//
// Rows with an unknown kind are dead letters too. It panics on a
// construction error (see TryCountPerKey).
func CountPerKey(s beam.Scope, rows beam.PCollection, opts ...Option) Result {
	r, err := TryCountPerKey(s, rows, opts...)
	if err != nil {
		panic(err)
	}
	return r
}

// TryCountPerKey is CountPerKey returning construction errors: no
// KindColumn, an unknown column, a kind column of the wrong type, a group
// column that cannot be a key, a row type that is not a struct.
func TryCountPerKey(s beam.Scope, rows beam.PCollection, opts ...Option) (Result, error) {
	c, err := newConfig(opts)
	fail := func(err error) (Result, error) { return Result{}, fmt.Errorf("changelog.CountPerKey: %w", err) }
	if err != nil {
		return fail(err)
	}
	if !rows.IsValid() {
		return fail(fmt.Errorf("input PCollection is invalid"))
	}
	t := rows.Type().Type()
	if _, err := count.NewColumns(t, c.kindCol, c.groupBy, c.key); err != nil {
		return fail(err)
	}
	s = s.Scope(c.uid)
	p := countParams{RowType: beam.EncodedType{T: t}, KindCol: c.kindCol, GroupBy: c.groupBy, UID: c.uid}
	bounded := pcol.IsBounded(rows) && !c.stream
	p.Bounded = bounded
	if bounded {
		p.Key = c.key
	}
	keyed, bad := beam.ParDo2(s.Scope("Key"), &keyChangeFn{P: p}, rows)
	var counts, late beam.PCollection
	if bounded {
		if len(p.Key) > 0 {
			perKey := beam.CombinePerKey(s.Scope("SumPerKey"), mergeDeltas, keyed)
			keyed = beam.ParDo(s.Scope("Match"), &matchFn{UID: c.uid}, perKey)
		}
		totals := beam.CombinePerKey(s.Scope("Sum"), mergeDeltas, keyed)
		counts, late = beam.ParDo2(s.Scope("Final"), &finalCountFn{UID: c.uid}, totals)
	} else {
		prismwarn.Check(context.Background(), prismwarn.Construction, fmt.Sprintf("changelog.CountPerKey (UID %s)", c.uid))
		counts, late = beam.ParDo2(s.Scope("Count"), &countFn{UID: c.uid, End: timers.InEventTime("end")}, keyed)
	}
	return Result{Counts: counts, DeadLetters: beam.Flatten(s, bad, late)}, nil
}

// Latest reduces CountPerKey's upsert stream to each group's current row,
// the one with the highest Version: what an upsert sink holds. It is a
// combine per group, so on a stream it emits when the window closes (for
// the global window, at the end of the input).
func Latest(s beam.Scope, counts beam.PCollection) beam.PCollection {
	s = s.Scope("Latest")
	keyed := beam.ParDo(s, groupOf, counts)
	return beam.DropKey(s, beam.CombinePerKey(s, laterCount, keyed))
}

func groupOf(c GroupCount) (string, GroupCount) { return c.Group, c }

// laterCount keeps the later of two counts of a group by the rows'
// comparator (rowcol.Order, Version its SequenceBy value) where there is
// no arrival order: the higher Version, or at an equal Version (counts of
// one group from different runs) the larger count, so that it is
// commutative, as a combine needs.
func laterCount(a, b GroupCount) GroupCount {
	stand := func(c GroupCount) []byte { return append(ordercoder.Int(nil, c.Count), c.Group...) }
	if rowcol.CompareRows(rowcol.Order{Seq: ordercoder.Int(nil, b.Version)}, stand(b), rowcol.Order{Seq: ordercoder.Int(nil, a.Version)}, stand(a)) > 0 {
		return b
	}
	return a
}

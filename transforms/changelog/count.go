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
	// Group is the value of a single GroupBy column as text (NULL for a
	// nil pointer), or a JSON array of several; "" without GroupBy. A nil
	// *string and "NULL" are counted apart but give the same text.
	Group string `json:"group" beam:"group"`
	// Count is the group's +I/+U rows less its -U/-D rows.
	Count int64 `json:"count" beam:"count"`
	// Version is the number of changes applied to the group so far: an
	// upsert sink keeps the row with the highest Version.
	Version int64 `json:"version" beam:"version"`
}

// Result is what CountPerKey returns.
type Result struct {
	// Counts are GroupCount rows: on a stream the group's new count after
	// every change, on bounded input one total per group.
	Counts beam.PCollection
	// DeadLetters are deadletter.DeadLetter rows: a row of an unknown kind,
	// and a group whose count ends below zero (its GroupCount as the row).
	DeadLetters beam.PCollection
}

// CountPerKey applies a changelog of rows (a PCollection of a struct type
// with a kind column) to a count per group: +I and +U add one to the row's
// group, -U and -D subtract one. A count is a sum, so the result does not
// depend on the order in which the changes arrive.
//
// It needs rowspec.KindColumn. Given rowspec.PartitionBy, a retraction on
// bounded input that outnumbers its key's own rows retracts a row the
// input never added and is ignored (retractions_ignored). OnTime and
// SequenceBy are ignored, so a KeepLast Result's Spec is taken as it is;
// rowspec.Upsert is refused.
//
// On a stream it keeps one count per group (and window) in value state and
// emits the group's new count after every change: an upsert stream of
// GroupCount by Group (Latest reduces it to each group's last row). A
// count below zero (a retraction that overtook its insertion) is not
// emitted; a group still below zero when its window ends is one dead
// letter. On bounded input it is a combine per group: one GroupCount per
// group, or a dead letter for a negative total.
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

// TryCountPerKey is CountPerKey returning construction errors.
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

// Latest reduces CountPerKey's upsert stream to each group's row with the
// highest Version, what an upsert sink holds, when the window closes.
func Latest(s beam.Scope, counts beam.PCollection) beam.PCollection {
	s = s.Scope("Latest")
	keyed := beam.ParDo(s, groupOf, counts)
	return beam.DropKey(s, beam.CombinePerKey(s, laterCount, keyed))
}

func groupOf(c GroupCount) (string, GroupCount) { return c.Group, c }

// laterCount keeps the count of higher Version, at an equal Version the
// larger count (rowcol.Order), so that it is commutative.
func laterCount(a, b GroupCount) GroupCount {
	stand := func(c GroupCount) []byte { return append(ordercoder.Int(nil, c.Count), c.Group...) }
	if rowcol.CompareRows(rowcol.Order{Seq: ordercoder.Int(nil, b.Version)}, stand(b), rowcol.Order{Seq: ordercoder.Int(nil, a.Version)}, stand(a)) > 0 {
		return b
	}
	return a
}

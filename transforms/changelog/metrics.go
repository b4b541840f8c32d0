package changelog

import (
	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamdedup/beamdedup/transforms/changelog/internal/count"
	"github.com/beamdedup/beamdedup/transforms/internal/metricsum"
)

// Counters are CountPerKey's metrics, summed over a job's steps: each
// field the Beam counter of that name in namespace
// beamdedup/changelog/<UID> (for example beamdedup/changelog/status-counts),
// so that each instance is read apart (CountersOf). Every input row is
// counted once in rows_in and once in exactly one of added, subtracted,
// retractions_ignored and dead_lettered.
type Counters struct {
	RowsIn     int64 // rows_in: rows entering CountPerKey
	Added      int64 // added: +I/+U rows applied
	Subtracted int64 // subtracted: -U/-D rows applied
	// RetractionsIgnored, retractions_ignored: on bounded input with the
	// key (rowspec.PartitionBy), -U/-D rows of a key whose +I/+U rows they
	// outnumber.
	RetractionsIgnored int64
	DeadLettered       int64 // dead_lettered: rows not applied: an unknown kind
	CountsEmitted      int64 // counts_emitted: GroupCount rows emitted
	// GroupsBelowZero, groups_below_zero: groups whose count ends below
	// zero (one dead letter each), at the end of the input or, on a
	// stream, of the window.
	GroupsBelowZero int64
}

// ReadCounters sums the counters of every CountPerKey of a pipeline run.
func ReadCounters(pr beam.PipelineResult) Counters { return CountersOf(pr, "") }

// CountersOf reads the counters of the CountPerKey whose UID (or default
// name) is uid; "" sums every one.
func CountersOf(pr beam.PipelineResult, uid string) Counters {
	var c Counters
	metricsum.Of(pr, count.Namespace+"/", uid, map[string]*int64{count.RowsIn: &c.RowsIn, count.Added: &c.Added, count.Subtracted: &c.Subtracted,
		count.RetractionsIgnored: &c.RetractionsIgnored, count.DeadLettered: &c.DeadLettered, count.CountsEmitted: &c.CountsEmitted,
		count.GroupsBelowZero: &c.GroupsBelowZero})
	return c
}

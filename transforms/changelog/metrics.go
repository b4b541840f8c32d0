package changelog

import (
	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamdedup/beamdedup/transforms/changelog/internal/count"
	"github.com/beamdedup/beamdedup/transforms/internal/metricsum"
)

// Counters are CountPerKey's metrics, summed over a job's steps, each in
// namespace beamdedup/changelog/<UID>. Every input row is counted in
// rows_in and in one of added, subtracted, retractions_ignored and
// dead_lettered.
type Counters struct {
	RowsIn             int64 // rows_in: rows entering CountPerKey
	Added              int64 // added: +I/+U rows applied
	Subtracted         int64 // subtracted: -U/-D rows applied
	RetractionsIgnored int64 // retractions_ignored: bounded, with the key: -U/-D rows outnumbering their key's +I/+U
	DeadLettered       int64 // dead_lettered: rows not applied: an unknown kind
	CountsEmitted      int64 // counts_emitted: GroupCount rows emitted
	GroupsBelowZero    int64 // groups_below_zero: groups whose count ends below zero (a dead letter each)
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

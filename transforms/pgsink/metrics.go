package pgsink

import (
	"context"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamdedup/beamdedup/transforms/internal/metricsum"
)

// Namespace is the Beam metrics namespace of the sink's counters.
const Namespace = "beamdedup/pgsink"

// Counter names. Every input row lands in exactly one of Written, Skipped,
// Deleted and DeadLettered once its batch is committed (Counters.Unaccounted
// is 0 after a run).
const (
	MetricRowsIn       = "rows_in"
	MetricWritten      = "written"       // rows inserted or updated
	MetricSkipped      = "skipped"       // rows that changed nothing: -U rows, rows folded away in their batch, keys already present (insert-only), rows equal to or older than the stored one
	MetricDeleted      = "deleted"       // -D rows that deleted a row or wrote a tombstone
	MetricDeadLettered = "dead_lettered" // rows refused by the table or unreadable (unknown kind, NULL ordering value)
	MetricRetries      = "retries"       // batch (or setup) attempts repeated after a lost connection or transient error
)

// Counters are the totals of the sink's counters over a pipeline run.
type Counters struct {
	RowsIn, Written, Skipped, Deleted, DeadLettered, Retries int64
}

// Unaccounted is the number of input rows in no outcome counter: 0 after
// any run.
func (c Counters) Unaccounted() int64 {
	return c.RowsIn - c.Written - c.Skipped - c.Deleted - c.DeadLettered
}

// ReadCounters sums the sink's counters from a pipeline result.
func ReadCounters(pr beam.PipelineResult) Counters {
	var c Counters
	metricsum.Sum(pr, Namespace, map[string]*int64{
		MetricRowsIn: &c.RowsIn, MetricWritten: &c.Written, MetricSkipped: &c.Skipped,
		MetricDeleted: &c.Deleted, MetricDeadLettered: &c.DeadLettered, MetricRetries: &c.Retries,
	})
	return c
}

var (
	cRowsIn       = beam.NewCounter(Namespace, MetricRowsIn)
	cWritten      = beam.NewCounter(Namespace, MetricWritten)
	cSkipped      = beam.NewCounter(Namespace, MetricSkipped)
	cDeleted      = beam.NewCounter(Namespace, MetricDeleted)
	cDeadLettered = beam.NewCounter(Namespace, MetricDeadLettered)
	cRetries      = beam.NewCounter(Namespace, MetricRetries)
)

// count adds a committed batch's outcome to the counters.
func count(ctx context.Context, r result) {
	cRowsIn.Inc(ctx, r.in)
	cWritten.Inc(ctx, r.written)
	cSkipped.Inc(ctx, r.skipped)
	cDeleted.Inc(ctx, r.deleted)
	cDeadLettered.Inc(ctx, int64(len(r.dead)))
}

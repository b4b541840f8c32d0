package pgsink

import (
	"context"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamdedup/beamdedup/transforms/internal/metricsum"
)

// Namespace is the prefix of the Beam metrics namespaces of the sink's
// counters: a sink counts in Namespace/<UID> (for example
// beamdedup/pgsink/PostgresWrite), so that each is read apart
// (CountersOf).
const Namespace = "beamdedup/pgsink"

// Counter names. Every input row lands in exactly one of Written, Skipped,
// Deleted and DeadLettered once its batch is committed (Counters.Unaccounted
// is 0 after a run).
const (
	MetricRowsIn       = "rows_in"       // rows entering the sink
	MetricWritten      = "written"       // rows inserted or updated
	MetricSkipped      = "skipped"       // rows that changed nothing: -U rows, rows folded away in their batch, keys already present (insert-only), rows equal to or older than the stored one
	MetricDeleted      = "deleted"       // -D rows that deleted a row or wrote a tombstone
	MetricDeadLettered = "dead_lettered" // rows refused by the table or unreadable (unknown kind, NULL ordering value)
	MetricRetries      = "retries"       // batch (or setup) attempts repeated after a lost connection or transient error
)

// Counters are the sink's counts, one field per counter above: over a
// pipeline run (ReadCounters, CountersOf), or of the batch a Writer's Add
// or Flush wrote.
type Counters struct {
	RowsIn, Written, Skipped, Deleted, DeadLettered, Retries int64
}

// Unaccounted is the number of input rows in no outcome counter: 0 after
// any run.
func (c Counters) Unaccounted() int64 {
	return c.RowsIn - c.Written - c.Skipped - c.Deleted - c.DeadLettered
}

// ReadCounters sums the counters of every sink of a pipeline run.
func ReadCounters(pr beam.PipelineResult) Counters { return CountersOf(pr, "") }

// CountersOf reads the counters of the sink whose UID (or default name) is
// uid; "" sums every one.
func CountersOf(pr beam.PipelineResult, uid string) Counters {
	var c Counters
	metricsum.Of(pr, Namespace+"/", uid, map[string]*int64{
		MetricRowsIn: &c.RowsIn, MetricWritten: &c.Written, MetricSkipped: &c.Skipped,
		MetricDeleted: &c.Deleted, MetricDeadLettered: &c.DeadLettered, MetricRetries: &c.Retries,
	})
	return c
}

// sinkMetrics are the counters of one sink.
type sinkMetrics struct {
	rowsIn, written, skipped, deleted, deadLettered, retries beam.Counter
}

func newSinkMetrics(uid string) *sinkMetrics {
	ns := Namespace + "/" + uid
	return &sinkMetrics{
		rowsIn: beam.NewCounter(ns, MetricRowsIn), written: beam.NewCounter(ns, MetricWritten), skipped: beam.NewCounter(ns, MetricSkipped),
		deleted: beam.NewCounter(ns, MetricDeleted), deadLettered: beam.NewCounter(ns, MetricDeadLettered), retries: beam.NewCounter(ns, MetricRetries),
	}
}

// count adds a committed batch's outcome to the counters.
func (m *sinkMetrics) count(ctx context.Context, r result) {
	m.rowsIn.Inc(ctx, r.in)
	m.written.Inc(ctx, r.written)
	m.skipped.Inc(ctx, r.skipped)
	m.deleted.Inc(ctx, r.deleted)
	m.deadLettered.Inc(ctx, int64(len(r.dead)))
}

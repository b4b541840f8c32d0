package pgsink

import (
	"context"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamdedup/beamdedup/internal/pgwrite"
	"github.com/beamdedup/beamdedup/transforms/internal/metricsum"
)

// namespace is the prefix of the Beam metrics namespaces of the sink's
// counters (see Counters).
const namespace = "beamdedup/pgsink"

// The counters' names (Counters' fields, and docs/pgsink.md, "Metrics").
const (
	metricRowsIn       = "rows_in"       // rows entering the sink
	metricWritten      = "written"       // rows inserted or updated
	metricSkipped      = "skipped"       // rows that changed nothing: -U rows, rows folded away in their batch, keys already present (insert-only), rows equal to or older than the stored one
	metricDeleted      = "deleted"       // -D rows that deleted a row or wrote a tombstone
	metricDeadLettered = "dead_lettered" // rows refused by the table or unreadable (unknown kind, NULL ordering value)
	metricRetries      = "retries"       // batch (or setup) attempts repeated after a lost connection or transient error
)

// Counters are the sink's counts over a pipeline run (ReadCounters,
// CountersOf), each field the Beam counter of that name in namespace
// beamdedup/pgsink/<UID> (for example beamdedup/pgsink/PostgresWrite), so
// that each sink is read apart. Every input row lands in exactly one of
// written, skipped, deleted and dead_lettered once its batch is committed
// (Unaccounted is 0 after a run).
type Counters struct {
	RowsIn  int64 // rows_in: rows entering the sink
	Written int64 // written: rows inserted or updated
	// Skipped, skipped: rows that changed nothing: -U rows, rows folded
	// away in their batch, keys already present (insert-only), rows equal
	// to or older than the stored one.
	Skipped      int64
	Deleted      int64 // deleted: -D rows that deleted a row or wrote a tombstone
	DeadLettered int64 // dead_lettered: rows refused by the table or unreadable (unknown kind, NULL ordering value)
	Retries      int64 // retries: batch (or setup) attempts repeated after a lost connection or transient error
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
	metricsum.Of(pr, namespace+"/", uid, map[string]*int64{
		metricRowsIn: &c.RowsIn, metricWritten: &c.Written, metricSkipped: &c.Skipped,
		metricDeleted: &c.Deleted, metricDeadLettered: &c.DeadLettered, metricRetries: &c.Retries,
	})
	return c
}

// sinkMetrics are the counters of one sink.
type sinkMetrics struct {
	rowsIn, written, skipped, deleted, deadLettered, retries beam.Counter
}

func newSinkMetrics(uid string) *sinkMetrics {
	ns := namespace + "/" + uid
	return &sinkMetrics{
		rowsIn: beam.NewCounter(ns, metricRowsIn), written: beam.NewCounter(ns, metricWritten), skipped: beam.NewCounter(ns, metricSkipped),
		deleted: beam.NewCounter(ns, metricDeleted), deadLettered: beam.NewCounter(ns, metricDeadLettered), retries: beam.NewCounter(ns, metricRetries),
	}
}

// count adds a committed batch's outcome to the counters.
func (m *sinkMetrics) count(ctx context.Context, r pgwrite.Result) {
	m.rowsIn.Inc(ctx, r.In)
	m.written.Inc(ctx, r.Written)
	m.skipped.Inc(ctx, r.Skipped)
	m.deleted.Inc(ctx, r.Deleted)
	m.deadLettered.Inc(ctx, int64(len(r.Dead)))
}

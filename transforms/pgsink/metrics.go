package pgsink

import (
	"context"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamdedup/beamdedup/internal/pgwrite"
	"github.com/beamdedup/beamdedup/transforms/internal/metricsum"
)

const namespace = "beamdedup/pgsink"

// The counters' names (Counters' fields).
const (
	metricRowsIn       = "rows_in"
	metricWritten      = "written"
	metricSkipped      = "skipped"
	metricDeleted      = "deleted"
	metricDeadLettered = "dead_lettered"
	metricRetries      = "retries"
)

// Counters are the sink's counts over a pipeline run, each in namespace
// beamdedup/pgsink/<UID>. Every input row lands in exactly one of written,
// skipped, deleted and dead_lettered once its batch is committed.
type Counters struct {
	RowsIn       int64 // rows_in: rows entering the sink
	Written      int64 // written: rows inserted or updated
	Skipped      int64 // skipped: -U rows, rows folded away, present keys (insert-only), rows no newer than the stored one
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

func (m *sinkMetrics) count(ctx context.Context, r pgwrite.Result) {
	m.rowsIn.Inc(ctx, r.In)
	m.written.Inc(ctx, r.Written)
	m.skipped.Inc(ctx, r.Skipped)
	m.deleted.Inc(ctx, r.Deleted)
	m.deadLettered.Inc(ctx, int64(len(r.Dead)))
}

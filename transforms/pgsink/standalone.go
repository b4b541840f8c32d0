package pgsink

import (
	"context"
	"fmt"
	"reflect"

	"github.com/beamdedup/beamdedup/transforms/deadletter"
)

// Writer is what Write runs on each worker, for a DoFn of your own that
// must know when a row is in the table: rows are folded per key and
// written in batches of BatchSize rows, one transaction each, with the same
// guard, dead letters and retries. A step that acknowledges its source per
// row (the Pub/Sub streaming pipeline) acknowledges a row once the Add or
// Flush that wrote it has returned. Open one per DoFn instance in Setup and
// close it in Teardown. It is not safe for concurrent use.
type Writer struct {
	w *writer
}

// NewWriter connects, checks the table for rows of rowType (as
// CheckTable) and returns a Writer. Close it when done.
func NewWriter(ctx context.Context, rowType reflect.Type, opts ...Option) (*Writer, error) {
	c := newConfig(opts)
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("pgsink: %w", err)
	}
	w, err := openWriter(ctx, &c, rowType)
	if err != nil {
		return nil, err
	}
	return &Writer{w: w}, nil
}

// Add adds row (a value of the Writer's row type) to the batch, writing
// the batch when it is full; the counters and dead letters are those of
// the batch written, if any.
func (w *Writer) Add(ctx context.Context, row any) (Counters, []deadletter.DeadLetter, error) {
	if !w.w.add(row) {
		return Counters{}, nil, nil
	}
	return w.Flush(ctx)
}

// Flush writes the rows added since the last write.
func (w *Writer) Flush(ctx context.Context) (Counters, []deadletter.DeadLetter, error) {
	r, err := w.w.flush(ctx)
	c := Counters{Retries: r.retries}
	if err != nil {
		return c, nil, err
	}
	c.RowsIn, c.Written, c.Skipped, c.Deleted, c.DeadLettered = r.in, r.written, r.skipped, r.deleted, int64(len(r.dead))
	return c, r.dead, nil
}

// Close releases the writer's connections. Rows not flushed are dropped.
func (w *Writer) Close() {
	if w.w != nil {
		w.w.close()
		w.w = nil
	}
}

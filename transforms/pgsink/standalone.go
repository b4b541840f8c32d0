package pgsink

import (
	"context"
	"fmt"
	"reflect"

	"github.com/beamdedup/beamdedup/transforms/deadletter"
	"github.com/beamdedup/beamdedup/transforms/internal/testhook"
)

// standalone is what Write runs on each worker, without a pipeline: rows
// are folded per key and written in batches of BatchSize rows, one
// transaction each, with the same guard, dead letters and retries. The
// sink's benchmark measures it (through package pgsinktest). It is not safe
// for concurrent use.
type standalone struct {
	w *writer
}

func init() {
	testhook.NewSinkWriter = func(ctx context.Context, rowType reflect.Type, opts any) (any, error) {
		w, err := newStandalone(ctx, rowType, opts.([]Option)...)
		if err != nil {
			return nil, err
		}
		return w, nil
	}
}

// newStandalone connects, checks the table for rows of rowType (as
// CheckTable) and returns a writer. Close it when done.
func newStandalone(ctx context.Context, rowType reflect.Type, opts ...Option) (*standalone, error) {
	c := newConfig(opts)
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("pgsink: %w", err)
	}
	w, err := openWriter(ctx, &c, rowType)
	if err != nil {
		return nil, err
	}
	return &standalone{w: w}, nil
}

// Add adds row (a value of the Writer's row type) to the batch, writing
// the batch when it is full; the counters and dead letters are those of
// the batch written, if any.
func (w *standalone) Add(ctx context.Context, row any) (Counters, []deadletter.DeadLetter, error) {
	if !w.w.add(row) {
		return Counters{}, nil, nil
	}
	return w.Flush(ctx)
}

// Flush writes the rows added since the last write.
func (w *standalone) Flush(ctx context.Context) (Counters, []deadletter.DeadLetter, error) {
	r, err := w.w.flush(ctx)
	c := Counters{Retries: r.retries}
	if err != nil {
		return c, nil, err
	}
	c.RowsIn, c.Written, c.Skipped, c.Deleted, c.DeadLettered = r.in, r.written, r.skipped, r.deleted, int64(len(r.dead))
	return c, r.dead, nil
}

// Close releases the writer's connections. Rows not flushed are dropped.
func (w *standalone) Close() {
	if w.w != nil {
		w.w.close()
		w.w = nil
	}
}

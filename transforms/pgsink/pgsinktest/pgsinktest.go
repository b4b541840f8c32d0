// Package pgsinktest opens the PostgreSQL sink's writer outside a pipeline,
// for the sink's benchmark: what each worker of pgsink.Write runs, without
// Beam. It is not part of the stable API.
package pgsinktest

import (
	"context"
	"reflect"

	"github.com/beamdedup/beamdedup/transforms/deadletter"
	"github.com/beamdedup/beamdedup/transforms/internal/testhook"
	"github.com/beamdedup/beamdedup/transforms/pgsink"
)

// Writer folds rows per key and writes them in batches of BatchSize rows,
// one transaction each, with the sink's guard, dead letters and retries.
// It is not safe for concurrent use.
type Writer interface {
	// Add adds row (a value of the writer's row type) to the batch,
	// writing the batch when it is full; the counters and dead letters are
	// those of the batch written, if any.
	Add(ctx context.Context, row any) (pgsink.Counters, []deadletter.DeadLetter, error)
	// Flush writes the rows added since the last write.
	Flush(ctx context.Context) (pgsink.Counters, []deadletter.DeadLetter, error)
	// Close releases the writer's connections; rows not flushed are
	// dropped.
	Close()
}

// NewWriter connects, checks the table for rows of rowType (as
// pgsink.CheckTable) and returns a Writer. Close it when done.
func NewWriter(ctx context.Context, rowType reflect.Type, opts ...pgsink.Option) (Writer, error) {
	w, err := testhook.NewSinkWriter(ctx, rowType, opts)
	if err != nil {
		return nil, err
	}
	return w.(Writer), nil
}

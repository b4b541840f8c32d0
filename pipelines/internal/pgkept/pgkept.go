// Package pgkept writes the rows a streaming pipeline kept into a
// PostgreSQL table with pgsink's writer (internal/pgwrite), and says which
// rows the table refused once their batch is committed: for a pipeline
// that settles each input only once its row is in the table, which
// pgsink.Write, returning no committed rows, cannot tell
// (pipelines/streaming).
package pgkept

import (
	"context"
	"reflect"

	"github.com/beamdedup/beamdedup/coders/keycoder"
	"github.com/beamdedup/beamdedup/internal/pgwrite"
)

// Writer writes rows of type T into a table keyed by its columns,
// insert-only: a row that is there already is left alone, so an input
// read again after a restart changes nothing.
type Writer[T any] struct {
	w       *pgwrite.Writer
	enc     *keycoder.Encoder
	reasons map[string]string // key of a refused row -> the table's reason
}

// Counts are what a call wrote: rows written or there already, and rows
// the table refused.
type Counts struct{ Written, Refused int64 }

// New connects to the database of dsn for table, keyed by columns.
func New[T any](ctx context.Context, dsn, table string, columns []string) (*Writer[T], error) {
	enc, err := keycoder.New(reflect.TypeFor[T](), columns)
	if err != nil {
		return nil, err
	}
	c := pgwrite.Defaults()
	c.DSN, c.Table, c.Roles.Key = dsn, table, columns
	if err := c.Validate(); err != nil {
		return nil, err
	}
	w, err := pgwrite.Open(ctx, c, reflect.TypeFor[T]())
	if err != nil {
		return nil, err
	}
	return &Writer[T]{w: w, enc: enc, reasons: map[string]string{}}, nil
}

// Start forgets the refusals of the last bundle.
func (w *Writer[T]) Start() { clear(w.reasons) }

// Add adds row to the current batch, which it commits when full.
func (w *Writer[T]) Add(ctx context.Context, row T) (Counts, error) {
	if !w.w.Add(row) {
		return Counts{}, nil
	}
	return w.Flush(ctx)
}

// Flush commits the rest.
func (w *Writer[T]) Flush(ctx context.Context) (Counts, error) {
	r, err := w.w.Flush(ctx)
	if err != nil {
		return Counts{}, err
	}
	return w.note(r), nil
}

// Refused returns the table's reason for the row of key (the key columns'
// encoding, keycoder) since Start, if it refused it.
func (w *Writer[T]) Refused(key []byte) (reason string, refused bool) {
	reason, refused = w.reasons[string(key)]
	return reason, refused
}

// Close closes the connection.
func (w *Writer[T]) Close() { w.w.Close() }

func (w *Writer[T]) note(r pgwrite.Result) Counts {
	for _, d := range r.Dead {
		w.reasons[string(w.enc.Append(nil, reflect.ValueOf(d.Row)))] = d.DeadLetter.Reason
	}
	return Counts{Written: r.Written + r.Skipped, Refused: int64(len(r.Dead))}
}

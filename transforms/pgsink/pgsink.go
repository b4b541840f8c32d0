// Package pgsink writes rows into a PostgreSQL table keyed like the
// deduplication that produced them, so that the table holds each key's row
// exactly once however often a runner retries a bundle or a source replays
// its input.
//
//	res := pgsink.Write(s, changes,
//	    pgsink.DSN(dsn),
//	    pgsink.Table("order_status"),
//	    rowspec.PartitionBy("order_id"), // the table's unique key
//	    rowspec.KindColumn("op"),        // +I/+U upsert, -U is skipped, -D deletes
//	    rowspec.OnTime("ts"),            // guard: an older version never overwrites a newer one
//	    pgsink.Tombstone("deleted"))     // a -D keeps its key's ts, so older rows stay out
//
// The rows' roles are rowspec's options; a dedup Result's Spec hands them
// on. Three modes, by the input:
//
//   - insert-only (the default): INSERT ... ON CONFLICT (key) DO NOTHING.
//   - upserts (rowspec.Upsert) and changelogs (rowspec.KindColumn):
//     INSERT ... ON CONFLICT (key) DO UPDATE, -U skipped, -D a DELETE or a
//     tombstone.
//   - guarded (with rowspec.SequenceBy or OnTime): a row replaces its key's
//     only when no older, so the table ends with each key's latest version
//     in any arrival order.
//
// Each bundle is written in batches (BatchSize rows), one transaction
// each, folded per key. A row the table refuses goes to the dead letters
// with the database's message; the rest of the batch commits. A lost
// connection is retried (Retries), then the bundle fails. A retried bundle
// changes nothing. docs/pgsink.md has the table layout and guarantees.
package pgsink

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamdedup/beamdedup/internal/pgwrite"
	"github.com/beamdedup/beamdedup/transforms/deadletter"
	"github.com/beamdedup/beamdedup/transforms/internal/dofn"
)

func init() {
	dofn.Register(&writeFn{}, func(fn any) dofn.Methods {
		f := fn.(*writeFn)
		return dofn.Methods{
			"Setup": dofn.F1x1(f.Setup, func(ctx any) any { return f.Setup(ctx.(context.Context)) }),
			"StartBundle": dofn.F2x0(f.StartBundle, func(ctx, dead any) {
				f.StartBundle(ctx.(context.Context), dead.(func(deadletter.DeadLetter)))
			}),
			"ProcessElement": dofn.F3x1(f.ProcessElement, func(ctx, row, dead any) any {
				return f.ProcessElement(ctx.(context.Context), row, dead.(func(deadletter.DeadLetter)))
			}),
			"FinishBundle": dofn.F2x1(f.FinishBundle, func(ctx, dead any) any {
				return f.FinishBundle(ctx.(context.Context), dead.(func(deadletter.DeadLetter)))
			}),
			"Teardown": dofn.F0x0(f.Teardown, f.Teardown),
		}
	})
}

const constructionTimeout = 30 * time.Second

// Result is what Write returns.
type Result struct {
	// DeadLetters are the rows the sink could not write, with the reason.
	DeadLetters beam.PCollection
}

// Write writes rows, a PCollection of a Go struct type, into the table and
// returns the rows it could not write. It panics on a construction error
// (see TryWrite).
func Write(s beam.Scope, rows beam.PCollection, opts ...Option) Result {
	r, err := TryWrite(s, rows, opts...)
	if err != nil {
		panic(err)
	}
	return r
}

// TryWrite is Write returning construction errors, the table's check
// (CheckTable) among them.
func TryWrite(s beam.Scope, rows beam.PCollection, opts ...Option) (Result, error) {
	c, err := newConfig(opts)
	fail := func(err error) (Result, error) {
		return Result{}, fmt.Errorf("pgsink.Write: %w", err)
	}
	if err != nil {
		return fail(err)
	}
	if !rows.IsValid() {
		return fail(fmt.Errorf("input PCollection is invalid"))
	}
	t := rows.Type().Type()
	if err := pgwrite.CheckRowType(c.w, t); err != nil {
		return fail(err)
	}
	if !c.hooks.SkipCheck {
		ctx, cancel := context.WithTimeout(context.Background(), constructionTimeout)
		defer cancel()
		if err := pgwrite.Check(ctx, c.w, t); err != nil {
			return fail(err)
		}
	}
	return Result{DeadLetters: beam.ParDo(s.Scope(c.w.UID), &writeFn{RowType: beam.EncodedType{T: t}, Config: c.w}, rows)}, nil
}

// CheckTable checks that rows of rowType map onto the table of opts (as
// for Write): every written column exists with a type it can take, the
// NOT NULL columns without a default are written, the tombstone column is
// boolean, and a unique index on exactly the key columns exists (NULLS NOT
// DISTINCT where a key can be NULL). Write and every worker call it.
func CheckTable(ctx context.Context, rowType reflect.Type, opts ...Option) error {
	c, err := newConfig(opts)
	if err != nil {
		return fmt.Errorf("pgsink: %w", err)
	}
	if err := pgwrite.CheckRowType(c.w, rowType); err != nil {
		return fmt.Errorf("pgsink: %w", err)
	}
	return pgwrite.Check(ctx, c.w, rowType)
}

// writeFn writes its bundles' rows (pgwrite.Writer).
type writeFn struct {
	RowType beam.EncodedType `json:"row_type"`
	Config  pgwrite.Config   `json:"config"`

	w        *pgwrite.Writer
	inflight *pgwrite.Inflight // the batch being written while the next one fills
	m        *sinkMetrics
}

func (f *writeFn) Setup(ctx context.Context) error {
	f.m = newSinkMetrics(f.Config.UID)
	w, err := pgwrite.Open(ctx, f.Config, f.RowType.T)
	f.w = w
	return err
}

// StartBundle drops what a failed bundle may have left.
func (f *writeFn) StartBundle(_ context.Context, _ func(deadletter.DeadLetter)) {
	if f.inflight != nil {
		f.w.Wait(f.inflight)
		f.inflight = nil
	}
	f.w.Reset()
}

// ProcessElement adds row to the batch. A full batch is written in the
// background while the next one fills (one at a time: in order).
func (f *writeFn) ProcessElement(ctx context.Context, row beam.T, dead func(deadletter.DeadLetter)) error {
	if !f.w.Add(row) {
		return nil
	}
	if err := f.collect(ctx, dead); err != nil {
		return err
	}
	f.inflight = f.w.FlushAsync(ctx)
	return nil
}

// FinishBundle writes the rest; its dead letters land in the global window.
func (f *writeFn) FinishBundle(ctx context.Context, dead func(deadletter.DeadLetter)) error {
	if err := f.collect(ctx, dead); err != nil {
		return err
	}
	r, err := f.w.Flush(ctx)
	return f.report(ctx, r, err, dead)
}

func (f *writeFn) Teardown() {
	if f.w != nil {
		if f.inflight != nil {
			f.w.Wait(f.inflight)
		}
		f.w.Close()
		f.w = nil
	}
}

// collect waits for the batch being written, if any, and reports it.
func (f *writeFn) collect(ctx context.Context, dead func(deadletter.DeadLetter)) error {
	if f.inflight == nil {
		return nil
	}
	r, err := f.w.Wait(f.inflight)
	f.inflight = nil
	return f.report(ctx, r, err, dead)
}

func (f *writeFn) report(ctx context.Context, r pgwrite.Result, err error, dead func(deadletter.DeadLetter)) error {
	f.m.retries.Inc(ctx, r.Retries)
	if err != nil {
		return err
	}
	for _, d := range r.Dead {
		dead(d.DeadLetter)
	}
	f.m.count(ctx, r)
	return nil
}

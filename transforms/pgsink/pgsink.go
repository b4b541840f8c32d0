// Package pgsink writes rows into a PostgreSQL table keyed like the
// deduplication that produced them, so that the table holds each key's row
// exactly once however often a runner retries a bundle or a source replays
// its input.
//
//	res := pgsink.Write(s, changes,
//	    pgsink.DSN(dsn),
//	    pgsink.Table("order_status"),
//	    pgsink.PartitionBy("order_id"), // the table's unique key
//	    pgsink.KindColumn("op"),        // +I/+U upsert, -U is skipped, -D deletes
//	    pgsink.OnTime("ts"),            // guard: an older version never overwrites a newer one
//	    pgsink.Tombstone("deleted"))    // a -D keeps its key's ts, so older rows stay out
//
// Three modes, by the input:
//
//   - insert-only (KeepFirst, WindowFirst/WindowLast output; the default):
//     INSERT ... ON CONFLICT (key) DO NOTHING.
//   - upserts (Upsert, for KeepLast's Upsert output) and changelogs
//     (KindColumn, for KeepLast's -U/+U output): INSERT ... ON
//     CONFLICT (key) DO UPDATE, -U skipped, -D a DELETE or a tombstone.
//   - guarded (SequenceBy/OnTime with either): the update happens only when
//     the incoming row's ordering value is at least the stored one, so the
//     table ends with each key's largest version in any arrival order.
//
// Each bundle is written in batches (BatchSize rows), one transaction per
// batch, each batch folded per key first and sent as one statement of
// unnest()ed column arrays. A row the table refuses (a constraint, a value
// its column cannot take) is found by halves under savepoints and goes to
// the returned dead letters with the database's message; the rest of the
// batch commits. A lost connection is retried with backoff (Retries), then
// the bundle fails. Rows equal to the stored one are not rewritten, so a
// retried bundle changes nothing. Counters (ReadCounters) add up to the
// rows in. docs/pgsink.md has the table layout, guarantees and
// measurements.
package pgsink

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/jackc/pgx/v5"

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

// constructionTimeout bounds the table check at construction.
const constructionTimeout = 30 * time.Second

// Result is what Write returns.
type Result struct {
	// DeadLetters are the rows the sink could not write (refused by the
	// table, an unknown kind, a NULL ordering value), as
	// deadletter.DeadLetter with the reason.
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

// TryWrite is Write returning construction errors instead of panicking:
// invalid options, a row type the options do not fit, and (unless
// SkipConstructionCheck) a table the row type does not map onto, checked
// by connecting to the database (CheckTable).
func TryWrite(s beam.Scope, rows beam.PCollection, opts ...Option) (Result, error) {
	c := newConfig(opts)
	fail := func(err error) (Result, error) {
		return Result{}, fmt.Errorf("pgsink.Write: %w", err)
	}
	if err := c.validate(); err != nil {
		return fail(err)
	}
	if !rows.IsValid() {
		return fail(fmt.Errorf("input PCollection is invalid"))
	}
	t := rows.Type().Type()
	l, err := newLayout(t, &c)
	if err != nil {
		return fail(err)
	}
	if !c.skipCheck {
		ctx, cancel := context.WithTimeout(context.Background(), constructionTimeout)
		defer cancel()
		if err := checkTable(ctx, &c, l); err != nil {
			return fail(err)
		}
	}
	return Result{DeadLetters: beam.ParDo(s.Scope(c.stepName()), newWriteFn(&c, t), rows)}, nil
}

// CheckTable checks that rows of rowType map onto the table of opts (DSN,
// Table, PartitionBy and the rest, as for Write): every written column
// exists with a type it can take, the table's NOT NULL columns without a
// default are written, the tombstone column is boolean, and a unique index
// on exactly the key columns exists, NULLS NOT DISTINCT where a key can be
// NULL. The error names every column that does not map. Write calls it at
// construction, and every worker runs it before its first bundle.
func CheckTable(ctx context.Context, rowType reflect.Type, opts ...Option) error {
	c := newConfig(opts)
	if err := c.validate(); err != nil {
		return fmt.Errorf("pgsink: %w", err)
	}
	l, err := newLayout(rowType, &c)
	if err != nil {
		return fmt.Errorf("pgsink: %w", err)
	}
	return checkTable(ctx, &c, l)
}

func checkTable(ctx context.Context, c *config, l *layout) error {
	dsn, err := c.resolveDSN()
	if err != nil {
		return err
	}
	cfg, err := parseDSN(dsn, 1)
	if err != nil {
		return err
	}
	t := newTarget(&cfg.ConnConfig.Config)
	conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig)
	if err != nil {
		return t.errorf("connect to check table %s: %w (SkipConstructionCheck defers the check to the workers)", c.table, err)
	}
	defer conn.Close(context.Background())
	ti, err := readTable(ctx, conn, c.table)
	if err != nil {
		return t.errorf("%w", err)
	}
	if err := ti.check(l, c); err != nil {
		return t.errorf("%w", err)
	}
	return nil
}

// writeFn writes its bundles' rows. Its exported fields are the
// configuration it travels to the workers with.
type writeFn struct {
	DSN       string           `json:"dsn,omitempty"`
	DSNEnv    string           `json:"dsn_env,omitempty"`
	Table     string           `json:"table"`
	RowType   beam.EncodedType `json:"row_type"`
	Keys      []string         `json:"keys"`
	KindCol   string           `json:"kind_col,omitempty"`
	Upsert    bool             `json:"upsert,omitempty"`
	SeqCol    string           `json:"seq_col,omitempty"`
	TimeCol   string           `json:"time_col,omitempty"`
	Tombstone string           `json:"tombstone,omitempty"`
	BatchSize int              `json:"batch_size"`
	MaxConns  int              `json:"max_conns"`
	Retries   int              `json:"retries"`
	Backoff   time.Duration    `json:"backoff"`
	UID       string           `json:"uid"`

	w        *writer
	inflight *inflight // the batch being written while the next one fills
	m        *sinkMetrics
}

func newWriteFn(c *config, t reflect.Type) *writeFn {
	return &writeFn{
		DSN: c.dsn, DSNEnv: c.dsnEnv, Table: c.table, RowType: beam.EncodedType{T: t},
		Keys: c.keys, KindCol: c.kindCol, Upsert: c.upsert, SeqCol: c.seqCol, TimeCol: c.timeCol, Tombstone: c.tombstone,
		BatchSize: c.batchSize, MaxConns: c.maxConns, Retries: c.retries, Backoff: c.backoff, UID: c.stepName(),
	}
}

func (f *writeFn) config() config {
	return config{
		dsn: f.DSN, dsnEnv: f.DSNEnv, table: f.Table, keys: f.Keys, kindCol: f.KindCol, upsert: f.Upsert,
		seqCol: f.SeqCol, timeCol: f.TimeCol, tombstone: f.Tombstone, batchSize: f.BatchSize,
		maxConns: f.MaxConns, retries: f.Retries, backoff: f.Backoff, uid: f.UID,
	}
}

// Setup opens (or shares) the worker's pool and checks the table, as at
// construction; a lost connection is retried as for a batch.
func (f *writeFn) Setup(ctx context.Context) error {
	c := f.config()
	f.m = newSinkMetrics(f.UID)
	w, err := openWriter(ctx, &c, f.RowType.T)
	f.w = w
	return err
}

// openWriter resolves the DSN, opens (or shares) the process's pool and
// reads and checks the table, retrying a lost connection as for a batch.
func openWriter(ctx context.Context, c *config, rowType reflect.Type) (*writer, error) {
	dsn, err := c.resolveDSN()
	if err != nil {
		return nil, fmt.Errorf("pgsink: %w", err)
	}
	l, err := newLayout(rowType, c)
	if err != nil {
		return nil, fmt.Errorf("pgsink: %w", err)
	}
	pool, t, err := acquirePool(dsn, c.maxConns)
	if err != nil {
		return nil, err
	}
	var p *plan
	_, err = newRetrier(t, c).retry(ctx, "reading table "+c.table, func(ctx context.Context) error {
		conn, err := pool.Acquire(ctx)
		if err != nil {
			return setupFault(classify(ctx, err, nil))
		}
		defer conn.Release()
		ti, err := readTable(ctx, conn, c.table)
		if err != nil {
			return setupFault(classify(ctx, err, conn.Conn()))
		}
		if err := ti.check(l, c); err != nil {
			return &fault{class: fatalFault, err: err}
		}
		p = newPlan(l, ti, c)
		return nil
	})
	if err != nil {
		releasePool(dsn, c.maxConns)
		return nil, err
	}
	w := newWriter(p, pool, t, c)
	w.dsn = dsn
	return w, nil
}

// setupFault makes every fault but a transient one fatal: reading the
// catalog refuses no row.
func setupFault(f *fault) *fault {
	if f.class != transientFault {
		f.class = fatalFault
	}
	return f
}

// StartBundle drops what a failed bundle may have left. (Beam Go wants
// the emitters of ProcessElement here too.)
func (f *writeFn) StartBundle(_ context.Context, _ func(deadletter.DeadLetter)) {
	if f.inflight != nil {
		f.w.wait(f.inflight)
		f.inflight = nil
	}
	f.w.reset()
}

// ProcessElement adds row to the batch. A full batch is written in the
// background while the next one fills (one at a time, so batches commit
// in order); its outcome is collected when the next one is full, or at
// the end of the bundle.
func (f *writeFn) ProcessElement(ctx context.Context, row beam.T, dead func(deadletter.DeadLetter)) error {
	if !f.w.add(row) {
		return nil
	}
	if err := f.collect(ctx, dead); err != nil {
		return err
	}
	f.inflight = f.w.flushAsync(ctx)
	return nil
}

// FinishBundle writes the rest of the bundle. Its dead letters land in
// the global window, where Beam Go puts FinishBundle's output.
func (f *writeFn) FinishBundle(ctx context.Context, dead func(deadletter.DeadLetter)) error {
	if err := f.collect(ctx, dead); err != nil {
		return err
	}
	r, err := f.w.flush(ctx)
	return f.report(ctx, r, err, dead)
}

// Teardown releases the pool.
func (f *writeFn) Teardown() {
	if f.w != nil {
		if f.inflight != nil {
			f.w.wait(f.inflight)
		}
		f.w.close()
		f.w = nil
	}
}

// collect waits for the batch being written, if any, and reports it.
func (f *writeFn) collect(ctx context.Context, dead func(deadletter.DeadLetter)) error {
	if f.inflight == nil {
		return nil
	}
	r, err := f.w.wait(f.inflight)
	f.inflight = nil
	return f.report(ctx, r, err, dead)
}

// report counts a written batch and emits its dead letters.
func (f *writeFn) report(ctx context.Context, r result, err error, dead func(deadletter.DeadLetter)) error {
	f.m.retries.Inc(ctx, r.retries)
	if err != nil {
		return err
	}
	for _, d := range r.dead {
		dead(d.DeadLetter)
	}
	f.m.count(ctx, r)
	return nil
}

package pgwrite

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/beamdedup/beamdedup/internal/rowcol"
	"github.com/beamdedup/beamdedup/transforms/deadletter"
	"github.com/beamdedup/beamdedup/transforms/rowkind"
)

// entry is one row of a batch: the last one of its key so far.
type entry struct {
	row   any
	v     reflect.Value
	del   bool         // a -D
	order rowcol.Order // its place in its key's order (guarded): its SequenceBy and OnTime values, a -D a retraction
}

// Result is what a flushed batch did: In = Written + Skipped + Deleted +
// len(Dead), with the attempts repeated (Retries).
type Result struct {
	In, Written, Skipped, Deleted, Retries int64
	Dead                                   []Refused
}

// Refused is a row the table refused, or that could not be read, with its
// dead letter: the row as it was added, so that a caller can tell which
// of its inputs it was.
type Refused struct {
	Row        any
	DeadLetter deadletter.DeadLetter
}

// add adds what the statements of o did (its rows written, skipped,
// deleted and refused) to r.
func (r *Result) add(o Result) {
	r.Written += o.Written
	r.Skipped += o.Skipped
	r.Deleted += o.Deleted
	r.Dead = append(r.Dead, o.Dead...)
}

// Writer writes batches of rows of one plan through a pool: rows are
// folded per key and written in batches of Config.BatchSize rows, one
// transaction each, with the guard, dead letters and retries. It is used
// by one DoFn instance (or one caller), so by one goroutine at a time.
type Writer struct {
	retrier
	plan      *plan
	pool      *pgxpool.Pool
	dsn       string // the pool's, to release it
	maxConns  int
	uid       string
	batchSize int64

	cur    *batch // the batch rows are folded into
	spare  *batch // a written batch, kept for reuse
	keyBuf []byte
	// sliceTypes caches reflect.SliceOf of each written column's type.
	sliceTypes []reflect.Type
}

// batch is the rows added since the last write, folded per key.
type batch struct {
	entries []entry
	index   map[string]int
	in      int64 // rows added
	skipped int64 // rows that will change nothing: -U rows, rows folded away
	dead    []Refused
}

func newBatch() *batch { return &batch{index: map[string]int{}} }

func (b *batch) reset() {
	clear(b.index)
	clear(b.entries) // drop the rows' references
	b.entries, b.in, b.skipped, b.dead = b.entries[:0], 0, 0, nil
}

func newWriter(p *plan, pool *pgxpool.Pool, dsn string, t target, c *Config) *Writer {
	w := &Writer{retrier: newRetrier(t, c), plan: p, pool: pool, dsn: dsn, maxConns: c.MaxConns, uid: c.UID, batchSize: int64(c.BatchSize), cur: newBatch()}
	for _, col := range p.cols {
		w.sliceTypes = append(w.sliceTypes, reflect.SliceOf(col.typ))
	}
	return w
}

// Close releases the writer's connections. Rows not flushed are dropped.
func (w *Writer) Close() { releasePool(w.dsn, w.maxConns) }

// Reset drops the rows added since the last write (what a failed bundle
// left).
func (w *Writer) Reset() { w.cur.reset() }

// Add folds row (a value of the writer's row type) into the batch and
// reports whether the batch is full: then Flush or FlushAsync writes it.
func (w *Writer) Add(row any) bool {
	w.fold(w.cur, row)
	return w.cur.in >= w.batchSize
}

// fold adds row to b, where a key keeps one row, the one that decides the
// key's state (insert-only: the first; otherwise the last by the ordering
// columns, or by arrival without them).
func (w *Writer) fold(b *batch, row any) {
	b.in++
	p := w.plan
	v := reflect.ValueOf(row)
	vals, reason := p.roles.Read(v, nil) // its SequenceBy value a fresh slice: the entry keeps it
	if reason != "" {
		b.dead = append(b.dead, Refused{Row: row, DeadLetter: deadletter.New(w.uid, row, reason)})
		return
	}
	if vals.Kind == rowkind.UpdateBefore {
		b.skipped++ // the +U that follows it replaces the row
		return
	}
	e := entry{row: row, v: v, del: vals.Kind == rowkind.Delete, order: vals.Order}
	w.keyBuf = p.keyEnc.Append(w.keyBuf[:0], v)
	if i, ok := b.index[string(w.keyBuf)]; ok {
		if w.replaces(&b.entries[i], &e) {
			b.entries[i] = e
		}
		b.skipped++
		return
	}
	b.index[string(w.keyBuf)] = len(b.entries)
	b.entries = append(b.entries, e)
}

// replaces reports whether e replaces old in the batch: insert-only keeps
// the first row, unguarded the last arrival, guarded the comparator's
// (rowcol.Later), the decision the SQL guard makes between the table's
// row and an incoming one.
func (w *Writer) replaces(old, e *entry) bool {
	switch {
	case w.plan.insertOnly:
		return false
	case !w.plan.guarded:
		return true
	}
	return rowcol.Later(e.order, old.order)
}

// Flush writes the batch in one transaction, retrying it on a new
// connection after a transient fault. The batch is kept on failure.
func (w *Writer) Flush(ctx context.Context) (Result, error) {
	r, err := w.write(ctx, w.cur)
	if err == nil {
		w.cur.reset()
	}
	return r, err
}

// write writes b in one transaction, retrying it on a new connection after
// a transient fault. It only reads the writer's plan and pool, so it may
// run beside fold on another batch.
func (w *Writer) write(ctx context.Context, b *batch) (Result, error) {
	r := Result{In: b.in, Skipped: b.skipped}
	if len(b.entries) > 0 {
		var s Result
		retries, err := w.retry(ctx, fmt.Sprintf("writing %d rows", len(b.entries)), func(ctx context.Context) error {
			var err error
			s, err = w.attempt(ctx, b.entries)
			return err
		})
		r.Retries = retries
		if err != nil {
			return r, err
		}
		r.add(s)
	}
	r.Dead = append(slices.Clip(b.dead), r.Dead...)
	return r, nil
}

// Inflight is a batch being written in the background (FlushAsync).
type Inflight struct {
	b    *batch
	done chan struct{}
	r    Result
	err  error
}

// FlushAsync starts writing the batch in the background, so that the next
// batch is folded while the database works on this one, and returns it;
// the caller waits for it (Wait) before starting another.
func (w *Writer) FlushAsync(ctx context.Context) *Inflight {
	f := &Inflight{b: w.cur, done: make(chan struct{})}
	if w.spare != nil {
		w.cur, w.spare = w.spare, nil
	} else {
		w.cur = newBatch()
	}
	go func() {
		defer close(f.done)
		f.r, f.err = w.write(ctx, f.b)
	}()
	return f
}

// Wait waits for f and keeps its batch for reuse.
func (w *Writer) Wait(f *Inflight) (Result, error) {
	<-f.done
	f.b.reset()
	w.spare = f.b
	return f.r, f.err
}

// attempt writes the batch on one connection: all of it in one
// transaction, or, when the table refuses a row, again with the refused
// rows found by halves under savepoints and dead-lettered.
func (w *Writer) attempt(ctx context.Context, es []entry) (Result, error) {
	conn, err := w.pool.Acquire(ctx)
	if err != nil {
		return Result{}, classify(ctx, err, nil)
	}
	defer conn.Release()
	plain := w.plan.insertOnly
	s, err := w.run(ctx, conn.Conn(), es, plain, false)
	if plain && isUniqueViolation(err) {
		// A key of the batch is in the table already (a replay, a retried
		// bundle): write the batch again with ON CONFLICT DO NOTHING.
		s, err = w.run(ctx, conn.Conn(), es, false, false)
	}
	if f := classify(ctx, err, conn.Conn()); f == nil || f.class != rowFault {
		return s, f.orNil()
	}
	s, err = w.run(ctx, conn.Conn(), es, false, true)
	return s, classify(ctx, err, conn.Conn()).orNil()
}

func isUniqueViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

// run writes the batch in one transaction: with the plain INSERT (plain,
// insert-only), or with the upsert, or row range by row range (bisect).
func (w *Writer) run(ctx context.Context, conn *pgx.Conn, es []entry, plain, bisect bool) (Result, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return Result{}, err
	}
	defer tx.Rollback(ctx) // after Commit: a no-op
	var s Result
	if bisect {
		// A deferred constraint then fails its statement, not the commit.
		if _, err := tx.Exec(ctx, "SET CONSTRAINTS ALL IMMEDIATE"); err != nil {
			return Result{}, err
		}
		err = w.bisect(ctx, tx, es, &s)
	} else {
		s, err = w.exec(ctx, tx, es, plain)
	}
	if err != nil {
		return Result{}, err
	}
	if err := tx.Commit(ctx); err != nil {
		return Result{}, err
	}
	return s, nil
}

// bisect writes es under a savepoint; if the table refuses a row, it
// rolls back to it and writes each half the same way, down to single rows,
// which are dead-lettered with the database's message.
func (w *Writer) bisect(ctx context.Context, tx pgx.Tx, es []entry, s *Result) error {
	if len(es) == 0 {
		return nil
	}
	sp, err := tx.Begin(ctx)
	if err != nil {
		return err
	}
	part, err := w.exec(ctx, sp, es, false)
	if err == nil {
		if err := sp.Commit(ctx); err != nil {
			return err
		}
		s.add(part)
		return nil
	}
	if f := classify(ctx, err, tx.Conn()); f.class != rowFault {
		return f
	}
	if err := sp.Rollback(ctx); err != nil {
		return err
	}
	if len(es) == 1 {
		s.Dead = append(s.Dead, Refused{Row: es[0].row, DeadLetter: deadletter.New(w.uid, es[0].row, w.target.scrub(dbMessage(err)))})
		return nil
	}
	mid := len(es) / 2
	if err := w.bisect(ctx, tx, es[:mid], s); err != nil {
		return err
	}
	return w.bisect(ctx, tx, es[mid:], s)
}

// AfterStatement, when a test sets it, runs after each statement of a
// batch, with the connection that ran it (to break it).
var AfterStatement func(ctx context.Context, conn *pgx.Conn)

// exec runs the statements of es: one upsert (or insert) for the live rows
// and tombstones, one delete per NULL pattern of the hard-deleted keys.
// plain uses the plain INSERT of an insert-only plan.
func (w *Writer) exec(ctx context.Context, tx pgx.Tx, es []entry, plain bool) (Result, error) {
	var s Result
	p := w.plan
	hardDeletes := p.roles.Kind != nil && p.tombstone == ""
	live := es
	var dels []entry
	if hardDeletes {
		live = nil
		for _, e := range es {
			if e.del {
				dels = append(dels, e)
			} else {
				live = append(live, e)
			}
		}
	}
	if len(live) > 0 {
		args := w.arrays(live)
		stmt := p.upsert
		if plain {
			stmt = p.insert
		}
		if p.upsertCounts {
			if err := tx.QueryRow(ctx, p.upsert, args...).Scan(&s.Written, &s.Deleted); err != nil {
				return Result{}, err
			}
		} else {
			tag, err := tx.Exec(ctx, stmt, args...)
			if err != nil {
				return Result{}, err
			}
			s.Written = tag.RowsAffected()
		}
		s.Skipped = int64(len(live)) - s.Written - s.Deleted
		if AfterStatement != nil {
			AfterStatement(ctx, tx.Conn())
		}
	}
	if len(dels) > 0 {
		groups := map[uint64][]entry{}
		for _, e := range dels {
			m := w.nullMask(e)
			groups[m] = append(groups[m], e)
		}
		for m, g := range groups {
			tag, err := tx.Exec(ctx, p.deleteSQL(m), w.keyArrays(g, m)...)
			if err != nil {
				return Result{}, err
			}
			s.Deleted += tag.RowsAffected()
			s.Skipped += int64(len(g)) - tag.RowsAffected()
		}
	}
	return s, nil
}

// arrays are the statement's arguments: each written column's values
// (column), then the tombstone flags.
func (w *Writer) arrays(es []entry) []any {
	p := w.plan
	args := make([]any, 0, len(p.cols)+1)
	for ci := range p.cols {
		args = append(args, w.column(ci, es))
	}
	if p.tombstone != "" {
		del := make([]bool, len(es))
		for i := range es {
			del[i] = es[i].del
		}
		args = append(args, del)
	}
	return args
}

// nullMask has bit i set when the i-th key column of e is NULL.
func (w *Writer) nullMask(e entry) uint64 {
	var m uint64
	for i, k := range w.plan.keys {
		c := w.plan.cols[k]
		if c.ptr && e.v.Field(c.index).IsNil() {
			m |= 1 << i
		}
	}
	return m
}

// keyArrays are the arguments of deleteSQL(mask): the non-NULL key
// columns.
func (w *Writer) keyArrays(es []entry, mask uint64) []any {
	var args []any
	for i, k := range w.plan.keys {
		if mask&(1<<i) == 0 {
			args = append(args, w.column(k, es))
		}
	}
	return args
}

// column is the values of the ci-th written column of es, as a slice of
// the field's type, so that pgx encodes it as an array of the column's
// type.
func (w *Writer) column(ci int, es []entry) any {
	c := w.plan.cols[ci]
	s := reflect.MakeSlice(w.sliceTypes[ci], len(es), len(es))
	for i := range es {
		s.Index(i).Set(es[i].v.Field(c.index))
	}
	return s.Interface()
}

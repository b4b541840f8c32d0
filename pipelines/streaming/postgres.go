package streaming

import (
	"context"
	"fmt"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/jackc/pgx/v5"

	"github.com/beamdedup/beamdedup/pipelines/internal/pgkept"
	"github.com/beamdedup/beamdedup/pipelines/jsonl"
)

// DefaultTable is the PostgreSQL table of the kept orders (Config.Postgres).
const DefaultTable = "orders"

// Counters of the PostgreSQL step, under the pipeline's namespace.
const (
	postgresWritten = "postgres_written" // rows written (or already there)
	postgresRefused = "postgres_refused" // rows the table refused, dead-lettered
)

// CreateTable creates table for orders.Order rows keyed by order_id, the
// layout Config.Postgres writes, unless it exists.
func CreateTable(ctx context.Context, dsn, table string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("streaming: connecting to PostgreSQL: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (
	order_id   text NOT NULL PRIMARY KEY,
	quantity   bigint NOT NULL,
	price      double precision NOT NULL,
	created_at timestamptz NOT NULL)`, pgx.Identifier{table}.Sanitize()))
	if err != nil {
		return fmt.Errorf("streaming: creating table %s: %w", table, err)
	}
	return nil
}

// postgresFn writes the rows of the kept elements into a table
// (pipelines/internal/pgkept: insert-only, keyed by the PartitionBy
// columns) and passes each element on, to written or to refused (a dead
// letter with the table's reason), at the end of the bundle, once the last
// batch committed: what follows in the stage never runs for a row that is
// not in the table.
type postgresFn[T any, E any] struct {
	DSN       string
	Table     string
	Columns   []string
	Input     string // what is read, named in dead letters
	Namespace string // of the counters

	el       elements[E]
	w        *pgkept.Writer[T]
	all      []E      // the bundle's elements
	keys     [][]byte // their keys
	cWritten beam.Counter
	cRefused beam.Counter
}

func (f *postgresFn[T, E]) Setup(ctx context.Context) error {
	f.el = elementsOf[E]()
	f.cWritten, f.cRefused = beam.NewCounter(f.Namespace, postgresWritten), beam.NewCounter(f.Namespace, postgresRefused)
	var err error
	f.w, err = pgkept.New[T](ctx, f.DSN, f.Table, f.Columns)
	return err
}

func (f *postgresFn[T, E]) StartBundle(context.Context, func([]byte, E), func(E)) {
	f.all, f.keys = f.all[:0], f.keys[:0]
	f.w.Start()
}

func (f *postgresFn[T, E]) ProcessElement(ctx context.Context, key []byte, e E, _ func([]byte, E), _ func(E)) error {
	row, reason := jsonl.ParseRow(reflect.TypeFor[T](), string(f.el.payload(e))) // decodeFn accepted it
	if reason != "" {
		return fmt.Errorf("a kept element does not decode: %s", reason)
	}
	f.all, f.keys = append(f.all, e), append(f.keys, key)
	c, err := f.w.Add(ctx, row.(T))
	f.count(ctx, c)
	return err
}

// FinishBundle writes the rest and passes every element of the bundle on.
func (f *postgresFn[T, E]) FinishBundle(ctx context.Context, written func([]byte, E), refused func(E)) error {
	c, err := f.w.Flush(ctx)
	f.count(ctx, c)
	if err != nil {
		return err
	}
	for i, e := range f.all {
		if reason, ok := f.w.Refused(f.keys[i]); ok {
			refused(f.el.deadLetter(e, fmt.Sprintf("refused by PostgreSQL table %s: %s", f.Table, reason), f.Input))
			continue
		}
		written(f.keys[i], e)
	}
	return nil
}

func (f *postgresFn[T, E]) Teardown() {
	if f.w != nil {
		f.w.Close()
	}
}

func (f *postgresFn[T, E]) count(ctx context.Context, c pgkept.Counts) {
	f.cWritten.Inc(ctx, c.Written)
	f.cRefused.Inc(ctx, c.Refused)
}

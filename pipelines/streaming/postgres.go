package streaming

import (
	"context"
	"fmt"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/jackc/pgx/v5"

	"github.com/beamdedup/beamdedup/pipelines/internal/pgkept"
	"github.com/beamdedup/beamdedup/transforms/pubsubio"
)

// DefaultTable is the PostgreSQL table of the kept orders (Config.Postgres).
const DefaultTable = "orders"

// Counters of the PostgreSQL step, under Namespace.
const (
	MetricPostgresWritten = "postgres_written" // rows written (or already there)
	MetricPostgresRefused = "postgres_refused" // rows the table refused, dead-lettered
)

var (
	pgWritten = beam.NewCounter(Namespace, MetricPostgresWritten)
	pgRefused = beam.NewCounter(Namespace, MetricPostgresRefused)
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

func registerPostgres[T any]() {
	register.DoFn5x1[context.Context, []byte, pubsubio.Message, func([]byte, pubsubio.Message), func(pubsubio.Message), error](&postgresFn[T]{})
}

// postgresFn writes the rows of the kept messages into a table
// (pipelines/internal/pgkept: insert-only, keyed by the PartitionBy
// columns: a row that is there already is left alone, so a message
// delivered again after a restart changes nothing) and passes each message
// on once its row is committed: to written, or to refused, as a dead
// letter with the table's reason. It emits at the end of the bundle, after
// the last batch committed, so that the publish and the ack that follow it
// in the stage never run for a row that is not in the table.
type postgresFn[T any] struct {
	DSN     string
	Table   string
	Columns []string
	// Subscription names the input in dead letters.
	Subscription string

	w    *pgkept.Writer[T]
	all  []pubsubio.Message // the bundle's messages
	keys [][]byte           // their keys
}

func (f *postgresFn[T]) Setup(ctx context.Context) error {
	var err error
	f.w, err = pgkept.New[T](ctx, f.DSN, f.Table, f.Columns)
	return err
}

func (f *postgresFn[T]) StartBundle(context.Context, func([]byte, pubsubio.Message), func(pubsubio.Message)) {
	f.all, f.keys = f.all[:0], f.keys[:0]
	f.w.Start()
}

func (f *postgresFn[T]) ProcessElement(ctx context.Context, key []byte, m pubsubio.Message, _ func([]byte, pubsubio.Message), _ func(pubsubio.Message)) error {
	row, err := decode[T](m.Data) // decodeFn accepted it
	if err != nil {
		return fmt.Errorf("streaming: a kept message does not decode: %v", err)
	}
	f.all, f.keys = append(f.all, m), append(f.keys, key)
	c, err := f.w.Add(ctx, row)
	count(ctx, c)
	return err
}

// FinishBundle writes the rest and passes every message of the bundle on.
func (f *postgresFn[T]) FinishBundle(ctx context.Context, written func([]byte, pubsubio.Message), refused func(pubsubio.Message)) error {
	c, err := f.w.Flush(ctx)
	count(ctx, c)
	if err != nil {
		return err
	}
	for i, m := range f.all {
		if reason, ok := f.w.Refused(f.keys[i]); ok {
			refused(deadLetter(m, fmt.Errorf("refused by PostgreSQL table %s: %s", f.Table, reason), f.Subscription))
			continue
		}
		written(f.keys[i], m)
	}
	return nil
}

func (f *postgresFn[T]) Teardown() {
	if f.w != nil {
		f.w.Close()
	}
}

func count(ctx context.Context, c pgkept.Counts) {
	pgWritten.Inc(ctx, c.Written)
	pgRefused.Inc(ctx, c.Refused)
}

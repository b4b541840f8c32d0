package kafka

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beamdedup/beamdedup/pipelines/internal/pgkept"
	"github.com/beamdedup/beamdedup/pipelines/jsonl"
	"github.com/beamdedup/beamdedup/transforms/kafkaio"
	"github.com/beamdedup/beamdedup/transforms/pgsink"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// DefaultTable is the PostgreSQL table of the kept orders (Config.Postgres);
// streaming.CreateTable makes one for the orders rows.
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

func registerPostgres[T any]() {
	register.DoFn5x1[context.Context, []byte, kafkaio.Record, func([]byte, kafkaio.Record), func(kafkaio.Record), error](&postgresFn[T]{})
}

// writePostgres adds the table's step after kept: the records whose rows
// are in the table, and the dead letters of those it refused.
func writePostgres[T any](s beam.Scope, cfg Config, kept beam.PCollection) (written, refused beam.PCollection, err error) {
	table := cfg.Table
	if table == "" {
		table = DefaultTable
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	err = pgsink.CheckTable(ctx, reflect.TypeFor[T](), pgsink.DSN(cfg.Postgres), pgsink.Table(table), rowspec.PartitionBy(cfg.PartitionBy...))
	cancel()
	if err != nil {
		return written, refused, fmt.Errorf("kafka: %w", err)
	}
	written, refused = beam.ParDo2(s, &postgresFn[T]{DSN: cfg.Postgres, Table: table, Columns: cfg.PartitionBy}, kept)
	return written, refused, nil
}

// postgresFn writes the rows of the kept records into a table
// (pipelines/internal/pgkept: insert-only, keyed by the PartitionBy
// columns) and passes each record on once its row is committed: to
// written, or to refused as a dead letter with the table's reason. It
// emits at the end of the bundle, after the last batch committed, so that
// the write and the commit that follow it in the stage never run for a row
// that is not in the table.
type postgresFn[T any] struct {
	DSN     string
	Table   string
	Columns []string

	w    *pgkept.Writer[T]
	all  []kafkaio.Record
	keys [][]byte
}

func (f *postgresFn[T]) Setup(ctx context.Context) error {
	var err error
	f.w, err = pgkept.New[T](ctx, f.DSN, f.Table, f.Columns)
	return err
}

func (f *postgresFn[T]) StartBundle(context.Context, func([]byte, kafkaio.Record), func(kafkaio.Record)) {
	f.all, f.keys = f.all[:0], f.keys[:0]
	f.w.Start()
}

func (f *postgresFn[T]) ProcessElement(ctx context.Context, key []byte, r kafkaio.Record, _ func([]byte, kafkaio.Record), _ func(kafkaio.Record)) error {
	row, reason := jsonl.ParseRow(reflect.TypeFor[T](), string(r.Value)) // decodeFn accepted it
	if reason != "" {
		return fmt.Errorf("kafka: a kept record does not decode: %s", reason)
	}
	f.all, f.keys = append(f.all, r), append(f.keys, key)
	c, err := f.w.Add(ctx, row.(T))
	count(ctx, c)
	return err
}

// FinishBundle writes the rest and passes every record of the bundle on.
func (f *postgresFn[T]) FinishBundle(ctx context.Context, written func([]byte, kafkaio.Record), refused func(kafkaio.Record)) error {
	c, err := f.w.Flush(ctx)
	count(ctx, c)
	if err != nil {
		return err
	}
	for i, r := range f.all {
		if reason, ok := f.w.Refused(f.keys[i]); ok {
			refused(DeadLetter(r, fmt.Sprintf("refused by PostgreSQL table %s: %s", f.Table, reason)))
			continue
		}
		written(f.keys[i], r)
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

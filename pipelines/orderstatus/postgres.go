package orderstatus

import (
	"context"
	"fmt"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/jackc/pgx/v5"

	"github.com/beamdedup/beamdedup/transforms/pgsink"
)

// DefaultTable is the PostgreSQL table of each order's current status.
const DefaultTable = "order_status"

// PostgresUID is the UID of the step that writes the table.
const PostgresUID = "order-status-postgres"

// writePostgres writes the keep-last changelog into table: a row per
// order, upserted on +I/+U (-U skipped) and guarded by ts, so that a retried
// bundle or an older event delivered late never overwrites a newer status.
// It returns the rows the table refused.
func writePostgres(s beam.Scope, changes beam.PCollection, dsn, table string) (beam.PCollection, error) {
	r, err := pgsink.TryWrite(s.Scope("Postgres"), changes, pgsink.DSN(dsn), pgsink.Table(table),
		Columns, pgsink.Tombstone("deleted"),
		pgsink.UID(PostgresUID))
	return r.DeadLetters, err
}

// CreateTable creates table, the layout writePostgres writes
// (docs/pgsink.md), unless it exists.
func CreateTable(ctx context.Context, dsn, table string) error {
	return withConn(ctx, dsn, func(conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (
	order_id text NOT NULL,
	status   text NOT NULL,
	ts       timestamptz NOT NULL,
	deleted  boolean NOT NULL DEFAULT false,
	UNIQUE NULLS NOT DISTINCT (order_id))`, pgx.Identifier{table}.Sanitize()))
		return err
	})
}

// TableCounts is the count per status of the orders in table: what the
// pipeline's count per status must equal.
func TableCounts(ctx context.Context, dsn, table string) (map[string]int64, error) {
	counts := map[string]int64{}
	err := withConn(ctx, dsn, func(conn *pgx.Conn) error {
		rows, err := conn.Query(ctx, fmt.Sprintf("SELECT status, count(*) FROM %s WHERE NOT deleted GROUP BY status", pgx.Identifier{table}.Sanitize()))
		if err != nil {
			return err
		}
		var status string
		var n int64
		_, err = pgx.ForEachRow(rows, []any{&status, &n}, func() error {
			counts[status] = n
			return nil
		})
		return err
	})
	return counts, err
}

func withConn(ctx context.Context, dsn string, f func(*pgx.Conn) error) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("orderstatus: connecting to PostgreSQL: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := f(conn); err != nil {
		return fmt.Errorf("orderstatus: %w", err)
	}
	return nil
}

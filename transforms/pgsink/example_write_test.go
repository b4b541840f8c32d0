package pgsink_test

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/teststream"
	"github.com/jackc/pgx/v5"

	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/pgsink"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// StatusChange is a version of an order: its status at time TS.
type StatusChange struct {
	Op      string    `beam:"op"` // written by KeepLast: +I, -U, +U
	OrderID string    `beam:"order_id"`
	Status  string    `beam:"status"`
	TS      time.Time `beam:"ts"`
}

func init() { beam.RegisterType(reflect.TypeFor[StatusChange]()) }

// KeepLast's changelog into a PostgreSQL table that holds each order's
// current status: +I and +U rows upsert, -U rows are skipped, and the ts
// guard keeps an older version from overwriting a newer one, however a
// runner retries or reorders the writes (a -D would mark its row deleted,
// keeping its ts for the guard).
//
// It writes to a database of the throwaway PostgreSQL server go test
// starts (testing/pgtest); yours is the DSN you give pgsink.DSN. It
// creates the table example_order_status there.
func ExampleWrite() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := exampleDSN // postgres://user@host:5432/db
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		panic(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `DROP TABLE IF EXISTS example_order_status;
		CREATE TABLE example_order_status (order_id text PRIMARY KEY, status text NOT NULL, ts timestamptz NOT NULL,
			deleted boolean NOT NULL DEFAULT false)`); err != nil {
		panic(err)
	}

	at := func(mm int) time.Time { return time.Date(2024, 1, 1, 10, mm, 0, 0, time.UTC) }
	ts := teststream.NewConfig()
	for i, c := range []StatusChange{
		{OrderID: "o1", Status: "created", TS: at(0)},
		{OrderID: "o2", Status: "created", TS: at(1)},
		{OrderID: "o1", Status: "paid", TS: at(5)},
		{OrderID: "o1", Status: "shipped", TS: at(9)},
	} {
		if err := ts.AddElements(c.TS.UnixMilli(), c); err != nil {
			panic(err)
		}
		if err := ts.AdvanceWatermark(c.TS.UnixMilli() + int64(i)); err != nil {
			panic(err)
		}
	}
	if err := ts.AdvanceWatermarkToInfinity(); err != nil {
		panic(err)
	}

	p, s := beam.NewPipelineWithRoot()
	current := dedup.KeepLast(s, teststream.Create(s, ts), rowspec.PartitionBy("order_id"), rowspec.OnTime("ts"), rowspec.KindColumn("op"))
	pgsink.Write(s, current.Rows,
		current.Spec,    // KeepLast's roles: order_id the table's unique key, op read (not written), ts the guard
		pgsink.DSN(dsn), // or DSNFromEnv, to keep a password out of the pipeline graph
		pgsink.Table("example_order_status"),
		pgsink.Tombstone("deleted")) // a -D keeps its key's ts, so an older row stays out
	if _, err := beam.Run(ctx, "prism", p); err != nil {
		panic(err)
	}

	rows, err := conn.Query(ctx, "SELECT order_id, status, ts FROM example_order_status WHERE NOT deleted ORDER BY order_id")
	if err != nil {
		panic(err)
	}
	for rows.Next() {
		var id, status string
		var at time.Time
		if err := rows.Scan(&id, &status, &at); err != nil {
			panic(err)
		}
		fmt.Println(id, status, at.UTC().Format("15:04"))
	}
	if err := rows.Err(); err != nil {
		panic(err)
	}
	// Output:
	// o1 shipped 10:09
	// o2 created 10:01
}

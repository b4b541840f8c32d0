package bench_test

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/jackc/pgx/v5"

	"github.com/beamdedup/beamdedup/internal/pgwrite"
	"github.com/beamdedup/beamdedup/testing/bench"
	"github.com/beamdedup/beamdedup/testing/pgtest"
	"github.com/beamdedup/beamdedup/transforms/pgsink"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// pgRow is an order row as the sink benchmarks write it; pgChange the same
// row in a changelog.
type pgRow struct {
	OrderID string    `beam:"order_id"`
	Status  string    `beam:"status"`
	TS      time.Time `beam:"ts"`
	Amount  int64     `beam:"amount"`
}

type pgChange struct {
	Op      string    `beam:"op"`
	OrderID string    `beam:"order_id"`
	Status  string    `beam:"status"`
	TS      time.Time `beam:"ts"`
	Amount  int64     `beam:"amount"`
}

func init() {
	beam.RegisterType(reflect.TypeFor[pgRow]())
	register.Function1x0(discardPgRow)
}

func discardPgRow(pgRow) {}

// pgTableDDL is the sink's documented layout (docs/pgsink.md).
const pgTableDDL = `CREATE TABLE %s (
	order_id text NOT NULL, status text NOT NULL, ts timestamptz NOT NULL, amount bigint NOT NULL,
	deleted boolean NOT NULL DEFAULT false,
	UNIQUE NULLS NOT DISTINCT (order_id))`

var pgBench struct {
	once sync.Once
	c    *pgtest.Cluster
	err  error
}

// pgCluster is the package's benchmark cluster, with PostgreSQL's default
// durability (fsync and synchronous commit on), as a real server has.
func pgCluster(b *testing.B) *pgtest.Cluster {
	b.Helper()
	pgBench.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		pgBench.c, pgBench.err = pgtest.Start(ctx, pgtest.Options{Durable: true})
	})
	if pgBench.err != nil {
		pgtest.SkipOrFail(b, pgBench.err)
	}
	return pgBench.c
}

// pgRows is n orders at version v: v's status and a time v minutes later.
func pgRows(n, v int) []pgRow {
	base := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	rows := make([]pgRow, n)
	for i := range rows {
		rows[i] = pgRow{OrderID: fmt.Sprintf("order-%08d", i), Status: []string{"created", "paid", "shipped"}[v%3], TS: base.Add(time.Duration(v) * time.Minute), Amount: int64(i % 997)}
	}
	return rows
}

type pgDB struct {
	dsn  string
	conn *pgx.Conn
}

func newPgDB(b *testing.B) *pgDB {
	b.Helper()
	c := pgCluster(b)
	ctx := context.Background()
	name := fmt.Sprintf("bench_%d", time.Now().UnixNano())
	dsn, err := c.CreateDatabase(ctx, name)
	if err != nil {
		b.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		conn.Close(ctx)
		c.DropDatabase(ctx, name)
	})
	return &pgDB{dsn: dsn, conn: conn}
}

func (db *pgDB) exec(b *testing.B, sql string) {
	b.Helper()
	if _, err := db.conn.Exec(context.Background(), sql); err != nil {
		b.Fatalf("%s: %v", sql, err)
	}
}

// freshTable drops and creates table, fills it with prefill (untimed),
// and checkpoints, so every measurement starts alike.
func (db *pgDB) freshTable(b *testing.B, table string, prefill []pgRow) {
	b.Helper()
	db.exec(b, "DROP TABLE IF EXISTS "+table)
	db.exec(b, fmt.Sprintf(pgTableDDL, table))
	if prefill != nil {
		pgValuesInsert(b, db.conn, table, prefill, 5000)
		db.exec(b, "VACUUM ANALYZE "+table)
	}
	db.exec(b, "CHECKPOINT")
}

// pgValuesInsert is the baseline: a plain batched INSERT, batch rows per
// multi-row VALUES statement, one transaction per statement.
func pgValuesInsert(b *testing.B, conn *pgx.Conn, table string, rows []pgRow, batch int) {
	ctx := context.Background()
	var sb strings.Builder
	for lo := 0; lo < len(rows); lo += batch {
		part := rows[lo:min(lo+batch, len(rows))]
		sb.Reset()
		sb.WriteString("INSERT INTO " + table + " (order_id, status, ts, amount) VALUES ")
		args := make([]any, 0, 4*len(part))
		for i, r := range part {
			if i > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, "($%d,$%d,$%d,$%d)", 4*i+1, 4*i+2, 4*i+3, 4*i+4)
			args = append(args, r.OrderID, r.Status, r.TS, r.Amount)
		}
		tx, err := conn.Begin(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tx.Exec(ctx, sb.String(), args...); err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// pgSinkWrite writes rows through the sink's writer (internal/pgwrite,
// what each worker runs) in batches of batch rows, keyed by order_id with
// the case's roles, and returns what it wrote.
func pgSinkWrite(b *testing.B, dsn, table string, rows []any, rowType reflect.Type, batch int, tc pgSinkCase) pgwrite.Result {
	b.Helper()
	ctx := context.Background()
	c := pgwrite.Defaults()
	c.DSN, c.Table, c.Roles, c.Tombstone, c.BatchSize = dsn, table, tc.roles, tc.tombstone, batch
	c.Roles.Key = []string{"order_id"}
	if err := c.Validate(); err != nil {
		b.Fatal(err)
	}
	w, err := pgwrite.Open(ctx, c, rowType)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	var total pgwrite.Result
	flush := func() {
		r, err := w.Flush(ctx)
		if err != nil {
			b.Fatal(err)
		}
		total.In += r.In
		total.Written += r.Written
		total.Skipped += r.Skipped
		total.Dead = append(total.Dead, r.Dead...)
	}
	for _, r := range rows {
		if w.Add(r) {
			flush()
		}
	}
	flush()
	return total
}

type pgSinkCase struct {
	name    string
	prefill bool // the table holds every key at an older version: updates
	change  bool // rows are +U changelog rows
	// roles are the rows' roles but the key (order_id), and tombstone the
	// table's tombstone column.
	roles     rowspec.Spec
	tombstone string
}

var pgSinkCases = []pgSinkCase{
	{name: "insert_only"},
	{name: "upsert", roles: rowspec.Spec{Upsert: true}},
	{name: "guarded_upsert", roles: rowspec.Spec{Upsert: true, OnTime: "ts"}},
	{name: "upsert_update", prefill: true, roles: rowspec.Spec{Upsert: true}},
	{name: "guarded_update", prefill: true, roles: rowspec.Spec{Upsert: true, OnTime: "ts"}},
	{name: "guarded_changelog_update", prefill: true, change: true,
		roles: rowspec.Spec{Kind: "op", OnTime: "ts"}, tombstone: "deleted"},
}

// BenchmarkPgSink compares rows/s through the sink's writer with the
// baseline, a plain batched INSERT of the same rows into an empty table of
// the same layout with the same driver, measured alternately in each round
// of one run. x_baseline is the median sink rate over the median baseline
// rate.
func BenchmarkPgSink(b *testing.B) {
	n := envInt("BEAMDEDUP_BENCH_PG_ROWS", 100_000)
	rounds := envInt("BEAMDEDUP_BENCH_PG_ROUNDS", 3)
	batch := pgwrite.DefaultBatchSize
	db := newPgDB(b)
	older, rows := pgRows(n, 0), pgRows(n, 1)
	asAny := make([]any, n)
	changes := make([]any, n)
	for i, r := range rows {
		asAny[i] = r
		changes[i] = pgChange{Op: "+U", OrderID: r.OrderID, Status: r.Status, TS: r.TS, Amount: r.Amount}
	}
	for _, tc := range pgSinkCases {
		b.Run(tc.name, func(b *testing.B) {
			for range b.N {
				var base, sink, ratio []float64
				startLoad := load1()
				for range rounds {
					db.freshTable(b, "baseline", nil)
					start := time.Now()
					pgValuesInsert(b, db.conn, "baseline", rows, batch)
					base = append(base, float64(n)/time.Since(start).Seconds())

					var prefill []pgRow
					if tc.prefill {
						prefill = older
					}
					db.freshTable(b, "sink", prefill)
					in, rowType := asAny, reflect.TypeFor[pgRow]()
					if tc.change {
						in, rowType = changes, reflect.TypeFor[pgChange]()
					}
					start = time.Now()
					c := pgSinkWrite(b, db.dsn, "sink", in, rowType, batch, tc)
					sink = append(sink, float64(n)/time.Since(start).Seconds())
					ratio = append(ratio, sink[len(sink)-1]/base[len(base)-1])
					if c.Written != int64(n) {
						b.Fatalf("%s: %d rows written, want %d (%+v)", tc.name, c.Written, n, c)
					}
				}
				b.ReportMetric(bench.Median(sink), "rows/s")
				b.ReportMetric(bench.Median(base), "baseline_rows/s")
				b.ReportMetric(bench.Median(sink)/bench.Median(base), "x_baseline")
				b.Logf("%s: %d rows, batches of %d, %d rounds: sink %.0f rows/s (%.0f–%.0f), baseline %.0f rows/s (%.0f–%.0f), ratio per round %.2f–%.2f; load %.1f → %.1f",
					tc.name, n, batch, rounds, bench.Median(sink), slices.Min(sink), slices.Max(sink), bench.Median(base), slices.Min(base), slices.Max(base),
					slices.Min(ratio), slices.Max(ratio), startLoad, load1())
			}
		})
	}
}

// BenchmarkPgSinkPipeline runs the insert-only case through a pipeline on
// Prism (in process, so Prism, the SDK harness and PostgreSQL share the
// machine), beside the same pipeline with a no-op in place of the sink
// (the runner's own cost for these rows) and the baseline, alternately in
// each round.
func BenchmarkPgSinkPipeline(b *testing.B) {
	n := envInt("BEAMDEDUP_BENCH_PG_ROWS", 100_000)
	rounds := envInt("BEAMDEDUP_BENCH_PG_ROUNDS", 3)
	db := newPgDB(b)
	rows := pgRows(n, 1)
	for range b.N {
		var base, floor, sink, ratio []float64
		startLoad := load1()
		for range rounds {
			db.freshTable(b, "baseline", nil)
			start := time.Now()
			pgValuesInsert(b, db.conn, "baseline", rows, pgwrite.DefaultBatchSize)
			base = append(base, float64(n)/time.Since(start).Seconds())

			p, s := beam.NewPipelineWithRoot()
			beam.ParDo0(s, discardPgRow, beam.CreateList(s, rows))
			_, took := runOnPrism(b, p, 10*time.Minute)
			floor = append(floor, float64(n)/took.Seconds())

			db.freshTable(b, "sink", nil)
			p, s = beam.NewPipelineWithRoot()
			pgsink.Write(s, beam.CreateList(s, rows), pgsink.DSN(db.dsn), pgsink.Table("sink"), rowspec.PartitionBy("order_id"))
			pr, took := runOnPrism(b, p, 10*time.Minute)
			if c := pgsink.ReadCounters(pr); c.Written != int64(n) {
				b.Fatalf("%d rows written, want %d (%+v)", c.Written, n, c)
			}
			sink = append(sink, float64(n)/took.Seconds())
			ratio = append(ratio, sink[len(sink)-1]/base[len(base)-1])
		}
		b.ReportMetric(bench.Median(sink), "rows/s")
		b.ReportMetric(bench.Median(sink)/bench.Median(base), "x_baseline")
		b.ReportMetric(bench.Median(floor), "runner_floor_rows/s")
		b.Logf("insert-only on Prism, %d rows, %d rounds: sink %.0f rows/s (%.0f–%.0f), runner floor %.0f rows/s (%.0f–%.0f), baseline %.0f rows/s (%.0f–%.0f), ratio per round %.2f–%.2f; load %.1f → %.1f",
			n, rounds, bench.Median(sink), slices.Min(sink), slices.Max(sink), bench.Median(floor), slices.Min(floor), slices.Max(floor),
			bench.Median(base), slices.Min(base), slices.Max(base), slices.Min(ratio), slices.Max(ratio), startLoad, load1())
	}
}

// BenchmarkPgBatchMethods measures the ways to send a batch, on the same
// rows and tables: one multi-row statement (unnest() of column arrays, the
// sink's) and COPY into a temporary table then INSERT ... SELECT, both
// with ON CONFLICT; for insert-only also the plain INSERT of unnest() the
// sink tries first, and the baseline's multi-row VALUES. Insert-only (ON
// CONFLICT DO NOTHING) into an empty table, and the guarded upsert over
// existing keys.
func BenchmarkPgBatchMethods(b *testing.B) {
	n := envInt("BEAMDEDUP_BENCH_PG_ROWS", 100_000)
	rounds := envInt("BEAMDEDUP_BENCH_PG_ROUNDS", 3)
	db := newPgDB(b)
	older, rows := pgRows(n, 0), pgRows(n, 1)
	const guard = ` DO UPDATE SET status = EXCLUDED.status, ts = EXCLUDED.ts, amount = EXCLUDED.amount
		WHERE t.ts <= EXCLUDED.ts AND ROW(t.status, t.ts, t.amount) IS DISTINCT FROM ROW(EXCLUDED.status, EXCLUDED.ts, EXCLUDED.amount)`
	for _, batch := range []int{1000, 5000} {
		for _, work := range []struct {
			name     string
			prefill  []pgRow
			conflict string
		}{{"insert_only", nil, " DO NOTHING"}, {"guarded_update", older, guard}} {
			b.Run(fmt.Sprintf("%s/batch_%d", work.name, batch), func(b *testing.B) {
				for range b.N {
					rates := map[string][]float64{}
					for range rounds {
						for _, m := range []string{"values", "unnest_plain", "unnest", "copy_merge"} {
							if strings.Contains(m, "plain") || m == "values" {
								if work.prefill != nil {
									continue // a plain INSERT cannot update
								}
							}
							db.freshTable(b, "t", work.prefill)
							start := time.Now()
							pgMethod(b, db.conn, m, rows, batch, work.conflict)
							rates[m] = append(rates[m], float64(n)/time.Since(start).Seconds())
						}
					}
					for m, r := range rates {
						b.ReportMetric(bench.Median(r), m+"_rows/s")
					}
					var line []string
					for _, m := range []string{"values", "unnest_plain", "unnest", "copy_merge"} {
						if r := rates[m]; len(r) > 0 {
							line = append(line, fmt.Sprintf("%s %.0f rows/s (%.0f–%.0f)", m, bench.Median(r), slices.Min(r), slices.Max(r)))
						}
					}
					b.Logf("%s, batches of %d, %d rounds: %s; load %.1f", work.name, batch, rounds, strings.Join(line, ", "), load1())
				}
			})
		}
	}
}

func pgMethod(b *testing.B, conn *pgx.Conn, method string, rows []pgRow, batch int, conflict string) {
	if method == "values" {
		pgValuesInsert(b, conn, "t", rows, batch)
		return
	}
	if method == "unnest_plain" {
		method, conflict = "unnest", ""
	}
	ctx := context.Background()
	const cols = "order_id, status, ts, amount"
	for lo := 0; lo < len(rows); lo += batch {
		part := rows[lo:min(lo+batch, len(rows))]
		tx, err := conn.Begin(ctx)
		if err != nil {
			b.Fatal(err)
		}
		switch method {
		case "unnest":
			ids, st, ts, am := make([]string, len(part)), make([]string, len(part)), make([]time.Time, len(part)), make([]int64, len(part))
			for i, r := range part {
				ids[i], st[i], ts[i], am[i] = r.OrderID, r.Status, r.TS, r.Amount
			}
			_, err = tx.Exec(ctx, "INSERT INTO t AS t ("+cols+") SELECT * FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::bigint[])"+onConflict(conflict), ids, st, ts, am)
		case "copy_merge":
			if _, err = tx.Exec(ctx, "CREATE TEMP TABLE IF NOT EXISTS stage (order_id text, status text, ts timestamptz, amount bigint) ON COMMIT DELETE ROWS"); err != nil {
				break
			}
			src := make([][]any, len(part))
			for i, r := range part {
				src[i] = []any{r.OrderID, r.Status, r.TS, r.Amount}
			}
			if _, err = tx.CopyFrom(ctx, pgx.Identifier{"stage"}, []string{"order_id", "status", "ts", "amount"}, pgx.CopyFromRows(src)); err != nil {
				break
			}
			_, err = tx.Exec(ctx, "INSERT INTO t AS t ("+cols+") SELECT "+cols+" FROM stage"+onConflict(conflict))
		}
		if err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func onConflict(action string) string {
	if action == "" {
		return ""
	}
	return " ON CONFLICT (order_id)" + action
}

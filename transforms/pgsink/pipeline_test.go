package pgsink_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/teststream"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/testing/deduptest"
	"github.com/beamdedup/beamdedup/testing/panetest"
	"github.com/beamdedup/beamdedup/testing/pgtest"
	"github.com/beamdedup/beamdedup/testing/prismtest"
	"github.com/beamdedup/beamdedup/transforms/changelog"
	"github.com/beamdedup/beamdedup/transforms/deadletter"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/pgsink"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// order is an insert-only row (KeepFirst's output).
type order struct {
	OrderID string `beam:"order_id"`
	Status  string `beam:"status"`
	Amount  int64  `beam:"amount"`
}

// event is an order event; KeepLast writes its kind into Op. A nil
// OrderID is the NULL key.
type event struct {
	Op      string    `beam:"op"`
	OrderID *string   `beam:"order_id"`
	Status  string    `beam:"status"`
	TS      time.Time `beam:"ts"`
}

// version is an upsert row ordered by Seq.
type version struct {
	ID    string `beam:"id"`
	Seq   int64  `beam:"seq"`
	Value string `beam:"value"`
}

func init() {
	beam.RegisterType(reflect.TypeFor[order]())
	beam.RegisterType(reflect.TypeFor[event]())
	beam.RegisterType(reflect.TypeFor[version]())
	register.Function1x1(isCheckViolation)
	register.Function1x1(formatGroupCount)
}

func isCheckViolation(d deadletter.DeadLetter) bool {
	return strings.Contains(d.Reason, "violates check constraint") && d.Transform == "orders-sink"
}

const eventDDL = `CREATE TABLE order_status (
	order_id text, status text NOT NULL, ts timestamptz NOT NULL,
	deleted boolean NOT NULL DEFAULT false,
	UNIQUE NULLS NOT DISTINCT (order_id))`

// newDB creates a database for t with ddl run in it.
func newDB(t *testing.T, ddl string) (string, *pgx.Conn) {
	t.Helper()
	dsn := pgtest.Shared(t).NewDatabase(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(ctx) })
	if ddl != "" {
		_, err = conn.Exec(ctx, ddl)
		require.NoError(t, err)
	}
	return dsn, conn
}

// snapshot is the result of query, one string per row.
func snapshot(t *testing.T, conn *pgx.Conn, query string) []string {
	t.Helper()
	rows, err := conn.Query(context.Background(), query)
	require.NoError(t, err)
	var out []string
	for rows.Next() {
		vals, err := rows.Values()
		require.NoError(t, err)
		parts := make([]string, len(vals))
		for i, v := range vals {
			parts[i] = fmt.Sprint(v)
		}
		out = append(out, strings.Join(parts, " "))
	}
	require.NoError(t, rows.Err())
	return out
}

// run builds a pipeline with build and runs it on Prism.
func run(t *testing.T, build func(s beam.Scope)) pgsink.Counters {
	t.Helper()
	p, s := beam.NewPipelineWithRoot()
	build(s)
	return pgsink.ReadCounters(prismtest.Run(t, p, 3*time.Minute))
}

func ptr(s string) *string { return &s }

func TestInsertOnlyWritesEachKeyOnceAndARerunChangesNothing(t *testing.T) {
	dsn, conn := newDB(t, `CREATE TABLE orders (order_id text PRIMARY KEY, status text, amount bigint)`)
	var rows []order
	for i := range 50 {
		o := order{OrderID: fmt.Sprintf("o%02d", i), Status: "created", Amount: int64(i)}
		rows = append(rows, o)
		if i%5 == 0 {
			rows = append(rows, o, o) // resends
		}
	}
	write := func(s beam.Scope) {
		dead := pgsink.Write(s, beam.CreateList(s, rows), pgsink.DSN(dsn), pgsink.Table("orders"), rowspec.PartitionBy("order_id")).DeadLetters
		passert.Empty(s, dead)
	}
	const table = "SELECT xmin::text, * FROM orders ORDER BY order_id"

	c := run(t, write)
	assert.Equal(t, pgsink.Counters{RowsIn: 70, Written: 50, Skipped: 20}, c)
	first := snapshot(t, conn, table)
	require.Len(t, first, 50)
	assert.Equal(t, "o07 created 7", strings.SplitN(first[7], " ", 2)[1])

	c = run(t, write)
	assert.Equal(t, pgsink.Counters{RowsIn: 70, Skipped: 70}, c)
	assert.Equal(t, first, snapshot(t, conn, table), "the rerun rewrote nothing (same rows, same xmin)")
}

// events is order histories with identical resends and out-of-order
// arrival, and each order's last status.
func events(r *rand.Rand, orders int) ([]event, map[string]string) {
	var out []event
	want := map[string]string{}
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	for i := range orders {
		id := ptr(fmt.Sprintf("o%03d", i))
		statuses := []string{"created", "paid", "shipped"}[:1+r.IntN(3)]
		for j, st := range statuses {
			e := event{OrderID: id, Status: st, TS: t0.Add(time.Duration(i)*time.Second + time.Duration(j)*time.Minute)}
			out = append(out, e)
			if r.IntN(3) == 0 {
				out = append(out, e)
			}
		}
		want[*id] = statuses[len(statuses)-1]
	}
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out, want
}

func TestKeepLastChangelogLandsAsEachKeysLastRowAndARerunLeavesTheTableUnchanged(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []dedup.Option
	}{
		{"bounded: each key's final row as +I", nil},
		{"stateful: -U/+U pairs for every change", []dedup.Option{dedup.AsStream(), dedup.MiniBatch(false)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dsn, conn := newDB(t, eventDDL)
			in, want := events(rand.New(rand.NewPCG(7, 19)), 40)
			write := func(s beam.Scope) {
				changes := dedup.KeepLast(s, beam.CreateList(s, in),
					append([]dedup.Option{rowspec.PartitionBy("order_id"), rowspec.OnTime("ts"), rowspec.KindColumn("op")}, tc.opts...)...).Rows
				dead := pgsink.Write(s, changes, pgsink.DSN(dsn), pgsink.Table("order_status"),
					rowspec.PartitionBy("order_id"), rowspec.KindColumn("op"), rowspec.OnTime("ts"), pgsink.Tombstone("deleted"), pgsink.BatchSize(16)).DeadLetters
				passert.Empty(s, dead)
			}
			c := run(t, write)
			assert.Zero(t, c.Unaccounted())
			assert.Zero(t, c.Deleted)
			assert.Len(t, snapshotAll(t, conn), 40)
			got := map[string]string{}
			for _, row := range snapshot(t, conn, "SELECT order_id, status FROM order_status WHERE NOT deleted") {
				f := strings.Fields(row)
				got[f[0]] = f[1]
			}
			assert.Equal(t, want, got)

			before := snapshotAll(t, conn)
			c = run(t, write)
			assert.Zero(t, c.Written+c.Deleted, "a rerun writes nothing")
			assert.Equal(t, c.RowsIn, c.Skipped)
			assert.Equal(t, before, snapshotAll(t, conn), "same rows, same xmin")
		})
	}
}

func snapshotAll(t *testing.T, conn *pgx.Conn) []string {
	return snapshot(t, conn, "SELECT xmin::text, order_id, status, ts, deleted FROM order_status ORDER BY order_id")
}

func TestUpsertsGuardedBySequenceByKeepTheLargestVersionInAnyOrder(t *testing.T) {
	dsn, conn := newDB(t, `CREATE TABLE versions (id text PRIMARY KEY, seq bigint NOT NULL, value text)`)
	r := rand.New(rand.NewPCG(3, 19))
	var rows []version
	want := map[string]string{}
	for i := range 30 {
		id := fmt.Sprintf("k%02d", i)
		n := 1 + r.IntN(6)
		for seq := range n {
			v := version{ID: id, Seq: int64(seq * 10), Value: fmt.Sprintf("%s-v%d", id, seq)}
			rows = append(rows, v)
			if r.IntN(2) == 0 {
				rows = append(rows, v)
			}
		}
		want[id] = fmt.Sprintf("%s-v%d", id, n-1)
	}
	r.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
	c := run(t, func(s beam.Scope) {
		// Batches of 7 rows: most keys' versions meet in the table, where
		// the SQL guard decides, rather than in one batch's fold.
		dead := pgsink.Write(s, beam.CreateList(s, rows), pgsink.DSN(dsn), pgsink.Table("versions"),
			rowspec.PartitionBy("id"), rowspec.Upsert(), rowspec.SequenceBy("seq"), pgsink.BatchSize(7)).DeadLetters
		passert.Empty(s, dead)
	})
	assert.Zero(t, c.Unaccounted())
	assert.Equal(t, int64(len(rows)), c.RowsIn)
	got := map[string]string{}
	for _, row := range snapshot(t, conn, "SELECT id, value FROM versions") {
		f := strings.Fields(row)
		got[f[0]] = f[1]
	}
	assert.Equal(t, want, got)
}

func TestAChangelogWithoutOrderingUpsertsAndDeletesByKeyIncludingTheNullKey(t *testing.T) {
	at := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	rows := []event{
		{Op: "+I", OrderID: ptr("a"), Status: "created", TS: at},
		{Op: "+I", OrderID: nil, Status: "created", TS: at},
		{Op: "+I", OrderID: ptr("b"), Status: "created", TS: at},
		{Op: "-U", OrderID: nil, Status: "created", TS: at},
		{Op: "+U", OrderID: nil, Status: "paid", TS: at},
		{Op: "-D", OrderID: ptr("a"), Status: "created", TS: at},
		{Op: "+I", OrderID: ptr("c"), Status: "created", TS: at},
		{Op: "-D", OrderID: ptr("c"), Status: "created", TS: at},
	}
	for _, batch := range []int{1, 3, 100} {
		t.Run(fmt.Sprintf("batches of %d", batch), func(t *testing.T) {
			dsn, conn := newDB(t, `CREATE TABLE order_status (order_id text UNIQUE NULLS NOT DISTINCT, status text, ts timestamptz)`)
			c := run(t, func(s beam.Scope) {
				dead := pgsink.Write(s, beam.CreateList(s, rows), pgsink.DSN(dsn), pgsink.Table("order_status"),
					rowspec.PartitionBy("order_id"), rowspec.KindColumn("op"), pgsink.BatchSize(batch)).DeadLetters
				passert.Empty(s, dead)
			})
			assert.Zero(t, c.Unaccounted())
			assert.Equal(t, int64(8), c.RowsIn)
			assert.Equal(t, []string{"b created", "<nil> paid"}, snapshot(t, conn, "SELECT coalesce(order_id, '<nil>'), status FROM order_status ORDER BY order_id"))

			// Deleting the NULL key deletes its one row.
			c = run(t, func(s beam.Scope) {
				pgsink.Write(s, beam.CreateList(s, []event{{Op: "-D", OrderID: nil, Status: "paid", TS: at}}), pgsink.DSN(dsn),
					pgsink.Table("order_status"), rowspec.PartitionBy("order_id"), rowspec.KindColumn("op"), pgsink.BatchSize(batch))
			})
			assert.Equal(t, pgsink.Counters{RowsIn: 1, Deleted: 1}, c)
			assert.Equal(t, []string{"b created"}, snapshot(t, conn, "SELECT coalesce(order_id, '<nil>'), status FROM order_status"))
		})
	}
}

func TestRowsViolatingAConstraintGoToTheDeadLettersAndTheRestIsWritten(t *testing.T) {
	dsn, conn := newDB(t, `CREATE TABLE orders (order_id text PRIMARY KEY, status text, amount bigint CHECK (amount >= 0))`)
	var rows []order
	for i := range 40 {
		rows = append(rows, order{OrderID: fmt.Sprintf("o%02d", i), Status: "created", Amount: int64(i%20 - 1)}) // i = 0, 20 are negative
	}
	c := run(t, func(s beam.Scope) {
		dead := pgsink.Write(s, beam.CreateList(s, rows), pgsink.DSN(dsn), pgsink.Table("orders"), rowspec.PartitionBy("order_id"), pgsink.UID("orders-sink")).DeadLetters
		passert.Count(s, dead, "dead letters", 2)
		passert.True(s, dead, isCheckViolation)
	})
	assert.Equal(t, pgsink.Counters{RowsIn: 40, Written: 38, DeadLettered: 2}, c)
	assert.Len(t, snapshot(t, conn, "SELECT * FROM orders"), 38)
}

func TestConnectionsDroppedMidRunAreRetriedAndTheTableIsComplete(t *testing.T) {
	dsn, conn := newDB(t, `CREATE TABLE orders (order_id text PRIMARY KEY, status text, amount bigint)`)
	var rows []order
	for i := range 20000 {
		rows = append(rows, order{OrderID: fmt.Sprintf("o%05d", i), Status: "created", Amount: int64(i)})
	}
	p, s := beam.NewPipelineWithRoot()
	r, err := pgsink.TryWrite(s, beam.CreateList(s, rows), pgsink.DSN(dsn), pgsink.Table("orders"), rowspec.PartitionBy("order_id"),
		pgsink.BatchSize(200), pgsink.Retries(20, 5*time.Millisecond))
	require.NoError(t, err)
	passert.Empty(s, r.DeadLetters)

	// Another session terminates the sink's connections while it writes,
	// as an administrator or a failover would.
	admin, err := pgx.Connect(context.Background(), dsn)
	require.NoError(t, err)
	defer admin.Close(context.Background())
	stop, done := make(chan struct{}), make(chan int)
	go func() {
		killed := 0
		for killed < 12 {
			select {
			case <-stop:
				done <- killed
				return
			case <-time.After(15 * time.Millisecond):
			}
			var n int
			if err := admin.QueryRow(context.Background(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
				WHERE application_name = 'beamdedup-pgsink' AND datname = current_database()`).Scan(&n); err == nil {
				killed += n
			}
		}
		<-stop
		done <- killed
	}()
	pr := prismtest.Run(t, p, 3*time.Minute)
	close(stop)
	killed := <-done
	c := pgsink.ReadCounters(pr)
	t.Logf("%d connections terminated, %d retries", killed, c.Retries)
	require.Positive(t, killed, "the run ended before a connection was terminated: nothing was tested")
	assert.Positive(t, c.Retries)
	assert.Equal(t, int64(20000), c.RowsIn)
	assert.Equal(t, int64(20000), c.Written+c.Skipped, "a batch whose commit was cut off may have committed: its retry skips its rows")
	assert.Zero(t, c.Unaccounted())
	var n int
	require.NoError(t, conn.QueryRow(context.Background(), "SELECT count(*) FROM orders").Scan(&n))
	assert.Equal(t, 20000, n)
}

// Two versions of each of 20 keys in the same millisecond, the later one
// (by microseconds) arriving first, through a stream: KeepLast drops the
// older one as out of order, and the table, whose guard compares the same
// microseconds, holds what KeepLast's changelog says, key for key.
func TestKeepLastAndTheTableAgreeOnTwoVersionsInTheSameMillisecond(t *testing.T) {
	dsn, conn := newDB(t, eventDDL)
	at := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	ts := teststream.NewConfig()
	var paid, created []any
	want := map[string]string{}
	for i := range 20 {
		id := fmt.Sprintf("o%02d", i)
		paid = append(paid, event{OrderID: ptr(id), Status: "paid", TS: at.Add(700 * time.Microsecond)})
		created = append(created, event{OrderID: ptr(id), Status: "created", TS: at.Add(200 * time.Microsecond)})
		want[id] = "paid"
	}
	require.NoError(t, ts.AddElements(at.UnixMilli(), paid...))
	require.NoError(t, ts.AdvanceWatermark(at.UnixMilli()))
	require.NoError(t, ts.AddElements(at.UnixMilli(), created...))
	require.NoError(t, ts.AdvanceWatermarkToInfinity())

	p, s := beam.NewPipelineWithRoot()
	res := dedup.KeepLast(s, teststream.Create(s, ts), rowspec.Spec{Key: []string{"order_id"}, OnTime: "ts", Kind: "op"})
	passert.Empty(s, pgsink.Write(s, res.Rows, res.Spec, pgsink.DSN(dsn), pgsink.Table("order_status"), pgsink.Tombstone("deleted")).DeadLetters)
	pr := prismtest.Run(t, p, 3*time.Minute)
	lc := dedup.ReadLastCounters(pr)
	assert.Equal(t, int64(20), lc.Inserts)
	assert.Equal(t, int64(20), lc.OutOfOrderDropped, "the older version of each key, arriving second")
	assert.Equal(t, int64(20), lc.Emitted(), "KeepLast's changelog: one +I per key, paid")
	assert.Zero(t, lc.Unaccounted())

	got := map[string]string{}
	for _, row := range snapshot(t, conn, "SELECT order_id, status FROM order_status WHERE NOT deleted") {
		f := strings.Fields(row)
		got[f[0]] = f[1]
	}
	assert.Equal(t, want, got, "the table holds each key's row as KeepLast's changelog leaves it")
}

// A backfill: bounded KeepLast over a changelog into a table that already
// holds its keys. A key whose history ends deleted comes out as -D, so the
// table deletes it (a tombstone), a key updated is updated, a key the
// input does not name stays; the count per status of the same output,
// given the key (Spec), counts what the backfill leaves live and ignores
// the -D of a row it never added.
func TestABoundedKeepLastBackfillDeletesTheKeysItEndsDeleted(t *testing.T) {
	dsn, conn := newDB(t, eventDDL)
	ts0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	_, err := conn.Exec(context.Background(), `INSERT INTO order_status (order_id, status, ts) VALUES ('o1', 'created', $1), ('o2', 'created', $1), ('o3', 'shipped', $1)`, ts0)
	require.NoError(t, err)
	rows := []event{
		{Op: "+I", OrderID: ptr("o1"), Status: "created", TS: ts0}, {Op: "-D", OrderID: ptr("o1"), Status: "created", TS: ts0},
		{Op: "+I", OrderID: ptr("o2"), Status: "created", TS: ts0}, {Op: "-U", OrderID: ptr("o2"), Status: "created", TS: ts0},
		{Op: "+U", OrderID: ptr("o2"), Status: "paid", TS: ts0.Add(time.Second)},
	}
	p, s := beam.NewPipelineWithRoot()
	res := dedup.KeepLast(s, beam.CreateList(s, rows), rowspec.Spec{Key: []string{"order_id"}, OnTime: "ts", Kind: "op"})
	passert.Empty(s, pgsink.Write(s, res.Rows, res.Spec, pgsink.DSN(dsn), pgsink.Table("order_status"), pgsink.Tombstone("deleted")).DeadLetters)
	counts := changelog.CountPerKey(s, res.Rows, res.Spec, changelog.GroupBy("status"))
	passert.Equals(s, beam.ParDo(s, formatGroupCount, counts.Counts), "paid=1")
	pr := prismtest.Run(t, p, 3*time.Minute)

	assert.Equal(t, dedup.LastCounters{RowsIn: 5, Inserts: 1, DeletesIn: 1, Superseded: 3, EmittedDelete: 1}, deduptest.LastRowCounts(dedup.ReadLastCounters(pr)))
	assert.Equal(t, changelog.Counters{RowsIn: 2, Added: 1, RetractionsIgnored: 1, CountsEmitted: 1}, changelog.ReadCounters(pr))
	assert.Equal(t, []string{"o1 created true", "o2 paid false", "o3 shipped false"},
		snapshot(t, conn, "SELECT order_id, status, deleted FROM order_status ORDER BY order_id"))
}

func formatGroupCount(c changelog.GroupCount) string { return fmt.Sprintf("%s=%d", c.Group, c.Count) }

// A table with no ordering column keeps the last row it is sent for a
// key: KeepLast's changelog, into it, ends on each key's last version
// when the key's rows reach the stateful step in one bundle and in two
// panes (rows of a GroupByKey's pane with rows a FinishBundle emitted).
func TestKeepLastIntoATableWithoutOrderingEndsOnEachKeysLastRowWhenItsRowsComeInMixedPanes(t *testing.T) {
	const keys = 200
	for _, tc := range []struct {
		name string
		opts []dedup.Option
		sink []pgsink.Option
	}{
		{"changelog", []dedup.Option{rowspec.KindColumn("op")}, nil},
		{"upserts", []dedup.Option{rowspec.Upsert()}, nil}, // Spec says they are
	} {
		t.Run(tc.name, func(t *testing.T) {
			dsn, conn := newDB(t, `CREATE TABLE versions (key text PRIMARY KEY, ver text NOT NULL, op text)`)
			c := run(t, func(s beam.Scope) {
				rows := beam.DropKey(s, panetest.Versions(s, keys))
				// Without the mini-batch, which would fold each key's rows to the
				// one that arrived last at the keying step, before the shuffle.
				opts := []dedup.Option{dedup.AsStream(), rowspec.PartitionBy("key"), dedup.MiniBatch(false)}
				res := dedup.KeepLast(s, rows, append(opts, tc.opts...)...)
				sink := append([]pgsink.Option{res.Spec, pgsink.DSN(dsn), pgsink.Table("versions")}, tc.sink...)
				passert.Empty(s, pgsink.Write(s, res.Rows, sink...).DeadLetters)
			})
			assert.Zero(t, c.Unaccounted())
			assert.Equal(t, []string{fmt.Sprintf("%d %s", keys, panetest.Last)},
				snapshot(t, conn, "SELECT count(*), ver FROM versions GROUP BY ver"), "every key on its last version")
		})
	}
}

package pgsink

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/internal/pgwrite"
	"github.com/beamdedup/beamdedup/internal/rowcol"
	"github.com/beamdedup/beamdedup/testing/pgtest"
	"github.com/beamdedup/beamdedup/transforms/deadletter"
	"github.com/beamdedup/beamdedup/transforms/internal/rowjson"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// ev is a changelog row as dedup.KeepLast writes it, with a nullable key.
type ev struct {
	Op     string    `beam:"op"`
	ID     *string   `beam:"id"`
	Status string    `beam:"status"`
	TS     time.Time `beam:"ts"`
}

const evDDL = `CREATE TABLE ev (
	id text, status text NOT NULL, ts timestamptz NOT NULL,
	deleted boolean NOT NULL DEFAULT false,
	UNIQUE NULLS NOT DISTINCT (id))`

var evOpts = []Option{Table("ev"), rowspec.PartitionBy("id"), rowspec.KindColumn("op"), rowspec.OnTime("ts"), Tombstone("deleted")}

// fixture is a database of its own with one table.
type fixture struct {
	t    *testing.T
	dsn  string
	conn *pgx.Conn
}

func newFixture(t *testing.T, ddl string) *fixture {
	t.Helper()
	dsn := pgtest.Shared(t).NewDatabase(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(ctx) })
	_, err = conn.Exec(ctx, ddl)
	require.NoError(t, err)
	return &fixture{t: t, dsn: dsn, conn: conn}
}

// fn builds and sets up the DoFn Write would run, for rows of type T.
func fn[T any](fx *fixture, opts ...Option) *writeFn {
	fx.t.Helper()
	c, err := newConfig(append([]Option{DSN(fx.dsn)}, opts...))
	require.NoError(fx.t, err)
	f := &writeFn{RowType: beam.EncodedType{T: reflect.TypeFor[T]()}, Config: c.w}
	require.NoError(fx.t, f.Setup(context.Background()))
	fx.t.Cleanup(f.Teardown)
	return f
}

// bundle runs rows through f as one bundle and returns its counters and
// dead letters.
func bundle[T any](f *writeFn, rows []T) (Counters, []deadletter.DeadLetter, error) {
	ctx := metrics.SetPTransformID(metrics.SetBundleID(context.Background(), "bundle"), "pgsink")
	var dead []deadletter.DeadLetter
	emit := func(d deadletter.DeadLetter) { dead = append(dead, d) }
	f.StartBundle(ctx, emit)
	for _, r := range rows {
		if err := f.ProcessElement(ctx, r, emit); err != nil {
			return counters(ctx), dead, err
		}
	}
	err := f.FinishBundle(ctx, emit)
	return counters(ctx), dead, err
}

func counters(ctx context.Context) Counters {
	var c Counters
	metrics.Extractor{SumInt64: func(l metrics.Labels, v int64) {
		if !strings.HasPrefix(l.Namespace(), namespace+"/") {
			return
		}
		switch l.Name() {
		case metricRowsIn:
			c.RowsIn += v
		case metricWritten:
			c.Written += v
		case metricSkipped:
			c.Skipped += v
		case metricDeleted:
			c.Deleted += v
		case metricDeadLettered:
			c.DeadLettered += v
		case metricRetries:
			c.Retries += v
		}
	}}.ExtractFrom(metrics.GetStore(ctx))
	return c
}

// evRow is a row of table ev.
type evRow struct {
	Status  string
	TS      time.Time
	Deleted bool
}

// evTable reads table ev (or another table of its layout) by key; the
// NULL key is "<nil>".
func (fx *fixture) evTable(table string) map[string]evRow {
	fx.t.Helper()
	rows, err := fx.conn.Query(context.Background(), "SELECT coalesce(id, '<nil>'), status, ts, deleted FROM "+table)
	require.NoError(fx.t, err)
	out := map[string]evRow{}
	for rows.Next() {
		var k string
		var r evRow
		require.NoError(fx.t, rows.Scan(&k, &r.Status, &r.TS, &r.Deleted))
		r.TS = r.TS.UTC()
		out[k] = r
	}
	require.NoError(fx.t, rows.Err())
	return out
}

func ptr(s string) *string { return &s }

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// changelog generates, for keys keys (one of them the NULL key), the
// changelog dedup.KeepLast emits for random histories in event-time order:
// +I for a key's first row, -U old/+U new for a newer version, -D carrying
// the stored row for a deletion, +I for a later re-insertion. Each key's
// versions have distinct times. It returns the changelog, keys' histories
// interleaved at random, and the table the ordered changelog must leave.
func changelog(r *rand.Rand, keys int) ([]ev, map[string]evRow) {
	type keyLog struct{ rows []ev }
	logs := make([]keyLog, keys)
	want := map[string]evRow{}
	statuses := []string{"created", "paid", "shipped", "cancelled"}
	for k := range logs {
		var id *string
		name := "<nil>"
		if k > 0 {
			id, name = ptr(fmt.Sprintf("o%03d", k)), fmt.Sprintf("o%03d", k)
		}
		ts := t0.Add(time.Duration(r.IntN(1000)) * time.Millisecond)
		var cur *ev
		for step := range 1 + r.IntN(6) {
			ts = ts.Add(time.Duration(1+r.IntN(5000)) * time.Microsecond)
			next := ev{ID: id, Status: statuses[r.IntN(len(statuses))], TS: ts}
			switch {
			case cur == nil:
				next.Op = "+I"
				logs[k].rows = append(logs[k].rows, next)
				cur = &next
			case step > 1 && r.IntN(4) == 0: // delete
				d := *cur
				d.Op = "-D"
				logs[k].rows = append(logs[k].rows, d)
				cur = nil
			default:
				old := *cur
				old.Op = "-U"
				next.Op = "+U"
				logs[k].rows = append(logs[k].rows, old, next)
				cur = &next
			}
		}
		last := logs[k].rows[len(logs[k].rows)-1]
		want[name] = evRow{Status: last.Status, TS: last.TS, Deleted: last.Op == "-D"}
	}
	// Interleave the keys' logs, keeping each key's order.
	var out []ev
	for {
		var open []int
		for k := range logs {
			if len(logs[k].rows) > 0 {
				open = append(open, k)
			}
		}
		if len(open) == 0 {
			return out, want
		}
		k := open[r.IntN(len(open))]
		out = append(out, logs[k].rows[0])
		logs[k].rows = logs[k].rows[1:]
	}
}

// shuffledWithRepeats is rows in random order with about a third of them
// sent two or three times.
func shuffledWithRepeats[T any](r *rand.Rand, rows []T) []T {
	out := slices.Clone(rows)
	for _, row := range rows {
		for range r.IntN(3) / 2 * (1 + r.IntN(2)) {
			out = append(out, row)
		}
	}
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// writeInBundles writes rows in random bundles of random batch sizes,
// retrying some of them (written again after later ones, as a runner
// retries a failed bundle), and returns the rows in the order the sink
// received them.
func writeInBundles[T any](t *testing.T, r *rand.Rand, f *writeFn, rows []T) []T {
	t.Helper()
	var sent []T
	var done [][]T
	for len(rows) > 0 {
		n := min(len(rows), 1+r.IntN(40))
		b := rows[:n]
		rows = rows[n:]
		f.Teardown()
		f.Config.BatchSize = 1 + r.IntN(20)
		require.NoError(t, f.Setup(context.Background()))
		_, _, err := bundle(f, b)
		require.NoError(t, err)
		sent, done = append(sent, b...), append(done, b)
		if r.IntN(5) == 0 {
			retry := done[r.IntN(len(done))]
			_, _, err := bundle(f, retry)
			require.NoError(t, err)
			sent = append(sent, retry...)
		}
	}
	return sent
}

func TestGuardedChangelogShuffledRepeatedAndRetriedEndsInTheOrderedTable(t *testing.T) {
	fx := newFixture(t, evDDL+"; CREATE TABLE ev_ordered (LIKE ev INCLUDING ALL)")
	shuffled := fn[ev](fx, evOpts...)
	ordered := fn[ev](fx, append(slices.Clone(evOpts), Table("ev_ordered"))...)
	ctx := context.Background()
	for seed := range uint64(25) {
		r := rand.New(rand.NewPCG(seed, 19))
		log, want := changelog(r, 2+r.IntN(30))
		for _, table := range []string{"ev", "ev_ordered"} {
			_, err := fx.conn.Exec(ctx, "TRUNCATE "+table)
			require.NoError(t, err)
		}
		_, _, err := bundle(ordered, log)
		require.NoError(t, err)
		writeInBundles(t, r, shuffled, shuffledWithRepeats(r, log))

		assert.Equal(t, want, fx.evTable("ev_ordered"), "seed %d: the ordered changelog in one bundle", seed)
		assert.Equal(t, want, fx.evTable("ev"), "seed %d: shuffled, repeated and retried", seed)
	}
}

func TestAnOlderVersionRetriedAfterADeleteDoesNotBringTheKeyBack(t *testing.T) {
	fx := newFixture(t, evDDL)
	f := fn[ev](fx, evOpts...)
	paid := ev{Op: "+U", ID: ptr("o1"), Status: "paid", TS: t0.Add(time.Second)}
	created := ev{Op: "+I", ID: ptr("o1"), Status: "created", TS: t0}
	del := paid
	del.Op = "-D"
	for _, b := range [][]ev{{created}, {paid}, {del}, {created}, {paid}} {
		_, _, err := bundle(f, b)
		require.NoError(t, err)
	}
	assert.Equal(t, map[string]evRow{"o1": {Status: "paid", TS: paid.TS, Deleted: true}}, fx.evTable("ev"),
		"the tombstone keeps ts: the retried +I (older) and +U (equal ts: a -D beats the row it deletes) stay out")

	reinsert := ev{Op: "+I", ID: ptr("o1"), Status: "created", TS: t0.Add(2 * time.Second)}
	_, _, err := bundle(f, []ev{reinsert})
	require.NoError(t, err)
	assert.Equal(t, map[string]evRow{"o1": {Status: "created", TS: reinsert.TS}}, fx.evTable("ev"), "a newer row replaces the tombstone")
}

func TestABundleThatFailsAfterWritingIsRetriedWithoutChangingTheTable(t *testing.T) {
	fx := newFixture(t, evDDL)
	f := fn[ev](fx, append(slices.Clone(evOpts), BatchSize(3))...)
	var rows []ev
	for i := range 7 {
		rows = append(rows, ev{Op: "+I", ID: ptr(fmt.Sprintf("o%d", i)), Status: "created", TS: t0})
	}
	// The bundle writes two batches of three, then fails before its end
	// (the runner abandons it: the next bundle's StartBundle waits for the
	// batch still being written).
	ctx := context.Background()
	noDead := func(deadletter.DeadLetter) { t.Fatal("no dead letter expected") }
	f.StartBundle(ctx, noDead)
	for _, r := range rows {
		require.NoError(t, f.ProcessElement(ctx, r, noDead))
	}
	f.StartBundle(ctx, noDead)
	assert.Len(t, fx.evTable("ev"), 6, "two batches committed before the failure")

	// The runner retries the whole bundle.
	c, dead, err := bundle(f, rows)
	require.NoError(t, err)
	assert.Empty(t, dead)
	assert.Equal(t, Counters{RowsIn: 7, Written: 1, Skipped: 6}, c, "the six rows already written are equal to the stored ones")
	assert.Len(t, fx.evTable("ev"), 7)

	// A newer bundle, then the old one retried late: the newer rows stay.
	newer := make([]ev, len(rows))
	for i, r := range rows {
		newer[i] = ev{Op: "+U", ID: r.ID, Status: "paid", TS: t0.Add(time.Minute)}
	}
	_, _, err = bundle(f, newer)
	require.NoError(t, err)
	c, _, err = bundle(f, rows)
	require.NoError(t, err)
	assert.Equal(t, Counters{RowsIn: 7, Skipped: 7}, c)
	for k, r := range fx.evTable("ev") {
		assert.Equal(t, "paid", r.Status, k)
	}
}

// terminateOwnBackend ends the server process behind conn from another
// session and waits for it to exit, as an administrator or a failover
// would.
func (fx *fixture) terminateOwnBackend(conn *pgx.Conn) {
	var ok bool
	err := fx.conn.QueryRow(context.Background(), "SELECT pg_terminate_backend($1, 5000)", conn.PgConn().PID()).Scan(&ok)
	require.NoError(fx.t, err)
	require.True(fx.t, ok)
}

func TestAConnectionLostInTheMiddleOfABatchIsRetriedOnANewOne(t *testing.T) {
	fx := newFixture(t, evDDL)
	f := fn[ev](fx, append(slices.Clone(evOpts), Retries(3, time.Millisecond))...)
	kills := 0
	pgwrite.AfterStatement = func(_ context.Context, conn *pgx.Conn) {
		if kills == 0 {
			kills++
			fx.terminateOwnBackend(conn)
		}
	}
	t.Cleanup(func() { pgwrite.AfterStatement = nil })

	rows := []ev{
		{Op: "+I", ID: ptr("a"), Status: "created", TS: t0},
		{Op: "+I", ID: nil, Status: "created", TS: t0},
		{Op: "-U", ID: ptr("a"), Status: "created", TS: t0},
		{Op: "+U", ID: ptr("a"), Status: "paid", TS: t0.Add(time.Second)},
	}
	c, _, err := bundle(f, rows)
	require.NoError(t, err)
	assert.Equal(t, 1, kills)
	assert.Equal(t, Counters{RowsIn: 4, Written: 2, Skipped: 2, Retries: 1}, c, "the killed attempt committed nothing and counted nothing")
	assert.Equal(t, map[string]evRow{
		"a":     {Status: "paid", TS: t0.Add(time.Second)},
		"<nil>": {Status: "created", TS: t0},
	}, fx.evTable("ev"))
}

func TestABatchFailsTheBundleAfterItsRetriesWithAClearErrorWithoutThePassword(t *testing.T) {
	fx := newFixture(t, evDDL)
	f := fn[ev](fx, append(slices.Clone(evOpts), Retries(2, time.Millisecond))...)
	pgwrite.AfterStatement = func(_ context.Context, conn *pgx.Conn) { fx.terminateOwnBackend(conn) }
	t.Cleanup(func() { pgwrite.AfterStatement = nil })

	_, _, err := bundle(f, []ev{{Op: "+I", ID: ptr("a"), Status: "created", TS: t0}})
	require.Error(t, err)
	msg := err.Error()
	assert.Contains(t, msg, "writing 1 rows")
	assert.Contains(t, msg, "3 times")
	assert.Contains(t, msg, "giving up")
	assert.Contains(t, msg, "(user postgres)")
	assert.NotContains(t, msg, pgtest.Shared(t).Password)
	assert.Empty(t, fx.evTable("ev"))
}

func TestSetupGivesUpOnAnUnreachableServerWithoutShowingThePassword(t *testing.T) {
	c := pgtest.Shared(t)
	port := closedPort(t)
	dsn := strings.Replace(c.DSN("nowhere"), c.Addr(), fmt.Sprintf("127.0.0.1:%d", port), 1)
	cfg, err := newConfig(append([]Option{DSN(dsn), Retries(2, time.Millisecond)}, evOpts...))
	require.NoError(t, err)
	err = (&writeFn{RowType: beam.EncodedType{T: reflect.TypeFor[ev]()}, Config: cfg.w}).Setup(context.Background())
	require.Error(t, err)
	msg := err.Error()
	assert.Contains(t, msg, fmt.Sprintf("127.0.0.1:%d/nowhere (user postgres)", port))
	assert.Contains(t, msg, "giving up")
	assert.NotContains(t, msg, c.Password)
}

func TestRowsTheTableRefusesAreFoundByHalvesAndTheRestCommits(t *testing.T) {
	fx := newFixture(t, `CREATE TABLE acct (id text PRIMARY KEY, amount bigint CHECK (amount >= 0), code varchar(3))`)
	type acct struct {
		ID     string `beam:"id"`
		Amount int64  `beam:"amount"`
		Code   string `beam:"code"`
	}
	f := fn[acct](fx, Table("acct"), rowspec.PartitionBy("id"), rowspec.Upsert())
	var rows []acct
	for i := range 100 {
		a := acct{ID: fmt.Sprintf("a%03d", i), Amount: int64(i), Code: "ok"}
		switch i {
		case 13, 77:
			a.Amount = -1
		case 50:
			a.Code = "toolong"
		}
		rows = append(rows, a)
	}
	c, dead, err := bundle(f, rows)
	require.NoError(t, err)
	assert.Equal(t, Counters{RowsIn: 100, Written: 97, DeadLettered: 3}, c)
	require.Len(t, dead, 3)
	reasons := map[string]string{}
	for _, d := range dead {
		assert.Equal(t, "PostgresWrite", d.Transform)
		reasons[d.Row] = d.Reason
	}
	assert.Contains(t, reasons[rowjson.Row(rows[13])], `violates check constraint "acct_amount_check" (SQLSTATE 23514)`)
	assert.Contains(t, reasons[rowjson.Row(rows[77])], "SQLSTATE 23514")
	assert.Contains(t, reasons[rowjson.Row(rows[50])], "value too long for type character varying(3) (SQLSTATE 22001)")
	var n int
	require.NoError(t, fx.conn.QueryRow(context.Background(), "SELECT count(*) FROM acct").Scan(&n))
	assert.Equal(t, 97, n)
}

func TestUnreadableRowsAreDeadLetteredBeforeTheDatabase(t *testing.T) {
	fx := newFixture(t, `CREATE TABLE v (id text PRIMARY KEY, seq bigint NOT NULL, deleted boolean NOT NULL DEFAULT false)`)
	type v struct {
		Op  string `beam:"op"`
		ID  string `beam:"id"`
		Seq *int64 `beam:"seq"`
	}
	one := int64(1)
	f := fn[v](fx, Table("v"), rowspec.PartitionBy("id"), rowspec.KindColumn("op"), rowspec.SequenceBy("seq"), Tombstone("deleted"))
	c, dead, err := bundle(f, []v{{Op: "+X", ID: "a", Seq: &one}, {Op: "+I", ID: "b"}, {Op: "+I", ID: "c", Seq: &one}})
	require.NoError(t, err)
	assert.Equal(t, Counters{RowsIn: 3, Written: 1, DeadLettered: 2}, c)
	require.Len(t, dead, 2)
	assert.Contains(t, dead[0].Reason, `unknown row kind "+X"`)
	assert.Equal(t, `SequenceBy column "seq" is NULL`, dead[1].Reason)
}

func closedPort(t *testing.T) int {
	t.Helper()
	// A port just released by a listener: nothing listens on it.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func TestTheStandaloneWriterWritesAsTheDoFnDoesAndReturnsTheRowsItRefused(t *testing.T) {
	fx := newFixture(t, evDDL)
	ctx := context.Background()
	c, err := newConfig(append([]Option{DSN(fx.dsn), BatchSize(2)}, evOpts...))
	require.NoError(t, err)
	w, err := pgwrite.Open(ctx, c.w, reflect.TypeFor[ev]())
	require.NoError(t, err)
	defer w.Close()
	var total pgwrite.Result
	add := func(r pgwrite.Result) {
		total.In, total.Written, total.Skipped = total.In+r.In, total.Written+r.Written, total.Skipped+r.Skipped
		total.Deleted, total.Retries, total.Dead = total.Deleted+r.Deleted, total.Retries+r.Retries, append(total.Dead, r.Dead...)
	}
	for _, r := range []ev{
		{Op: "+I", ID: ptr("a"), Status: "created", TS: t0},
		{Op: "-U", ID: ptr("a"), Status: "created", TS: t0},
		{Op: "+U", ID: ptr("a"), Status: "paid", TS: t0.Add(time.Second)},
		{Op: "?", ID: ptr("b"), Status: "paid", TS: t0},
	} {
		if w.Add(r) {
			res, err := w.Flush(ctx)
			require.NoError(t, err)
			add(res)
		}
	}
	res, err := w.Flush(ctx)
	require.NoError(t, err)
	add(res)
	if assert.Len(t, total.Dead, 1) {
		assert.Equal(t, ev{Op: "?", ID: ptr("b"), Status: "paid", TS: t0}, total.Dead[0].Row, "the row as added")
		assert.Contains(t, total.Dead[0].DeadLetter.Reason, `unknown row kind "?"`)
	}
	total.Dead = nil
	assert.Equal(t, pgwrite.Result{In: 4, Written: 2, Skipped: 1}, total, "batches of 2: +I a, then -U skipped and +U a")
	assert.Equal(t, map[string]evRow{"a": {Status: "paid", TS: t0.Add(time.Second)}}, fx.evTable("ev"))
}

func TestInsertOnlyTriesAPlainInsertAndFallsBackToOnConflictWhenAKeyIsPresent(t *testing.T) {
	fx := newFixture(t, `CREATE TABLE users (id text PRIMARY KEY, email text UNIQUE)`)
	type user struct {
		ID    string `beam:"id"`
		Email string `beam:"email"`
	}
	f := fn[user](fx, Table("users"), rowspec.PartitionBy("id"))
	for _, tc := range []struct {
		name string
		rows []user
		want Counters
		dead string
	}{
		{"new keys", []user{{"a", "a@x"}, {"b", "b@x"}}, Counters{RowsIn: 2, Written: 2}, ""},
		{"a key already there", []user{{"b", "b@x"}, {"c", "c@x"}}, Counters{RowsIn: 2, Written: 1, Skipped: 1}, ""},
		{"another unique column taken", []user{{"d", "a@x"}, {"e", "e@x"}}, Counters{RowsIn: 2, Written: 1, DeadLettered: 1},
			`duplicate key value violates unique constraint "users_email_key" (SQLSTATE 23505): Key (email)=(a@x) already exists.`},
	} {
		c, dead, err := bundle(f, tc.rows)
		require.NoError(t, err, tc.name)
		assert.Equal(t, tc.want, c, tc.name)
		if tc.dead == "" {
			assert.Empty(t, dead, tc.name)
		} else if assert.Len(t, dead, 1, tc.name) {
			assert.Equal(t, tc.dead, dead[0].Reason)
		}
	}
	var n int
	require.NoError(t, fx.conn.QueryRow(context.Background(), "SELECT count(*) FROM users").Scan(&n))
	assert.Equal(t, 4, n)
}

// ver is a version of a key for the guard's property test: a SequenceBy
// value, a time to the nanosecond (the table keeps microseconds) and a
// status.
type ver struct {
	Op     string    `beam:"op"`
	ID     *string   `beam:"id"`
	Seq    int64     `beam:"seq"`
	TS     time.Time `beam:"ts"`
	Status string    `beam:"status"`
}

const verDDL = `CREATE TABLE ver (
	id text, seq bigint NOT NULL, ts timestamptz NOT NULL, status text NOT NULL,
	deleted boolean NOT NULL DEFAULT false,
	UNIQUE NULLS NOT DISTINCT (id))`

// The SQL guard is the comparator: random versions of random keys (one the
// NULL key) with many ties (equal SequenceBy values, times a microsecond or
// a few nanoseconds apart in one millisecond, equal rows), tombstones and
// -U rows, shuffled and repeated, written in random bundles and batches
// with retried bundles, leave every key's row as rowspec's comparator,
// applied to the rows in the order the sink received them (a -U skipped, a
// tie to the later arrival, a -D after a live row of its value), says.
func TestTheGuardKeepsTheComparatorsWinnerOfEveryKey(t *testing.T) {
	fx := newFixture(t, verDDL)
	for _, spec := range []rowspec.Spec{
		{Key: []string{"id"}, Kind: "op", OnTime: "ts"},
		{Key: []string{"id"}, Kind: "op", SequenceBy: "seq"},
		{Key: []string{"id"}, Kind: "op", SequenceBy: "seq", OnTime: "ts"},
	} {
		t.Run(fmt.Sprintf("SequenceBy %q OnTime %q", spec.SequenceBy, spec.OnTime), func(t *testing.T) {
			f := fn[ver](fx, Table("ver"), spec, Tombstone("deleted"))
			cols, err := rowcol.Resolve(spec, reflect.TypeFor[ver]())
			require.NoError(t, err)
			order := func(v ver) rowcol.Order {
				vals, reason := cols.Read(reflect.ValueOf(v), nil)
				require.Empty(t, reason)
				return vals.Order
			}
			for seed := range uint64(20) {
				r := rand.New(rand.NewPCG(seed, 23))
				_, err := fx.conn.Exec(context.Background(), "TRUNCATE ver")
				require.NoError(t, err)
				var rows []ver
				for k := range 1 + r.IntN(25) {
					var id *string
					if k > 0 {
						id = ptr(fmt.Sprintf("k%02d", k))
					}
					for range 1 + r.IntN(6) {
						v := ver{
							Op: []string{"+I", "+U", "+U", "-U", "-D"}[r.IntN(5)], ID: id, Seq: int64(r.IntN(3)),
							TS:     t0.Add(time.Duration(r.IntN(2))*time.Millisecond + time.Duration(r.IntN(3))*time.Microsecond + time.Duration(r.IntN(2)*400)),
							Status: []string{"created", "paid", "shipped"}[r.IntN(3)],
						}
						rows = append(rows, v)
						if r.IntN(5) == 0 {
							rows = append(rows, v) // an equal row
						}
					}
				}
				sent := writeInBundles(t, r, f, shuffledWithRepeats(r, rows))

				want := map[string]evRow{}
				kept := map[string]ver{}
				for _, v := range sent {
					if v.Op == "-U" {
						continue // the +U after it replaces the row
					}
					k := "<nil>"
					if v.ID != nil {
						k = *v.ID
					}
					o := order(v)
					if w, ok := kept[k]; ok && !rowcol.Later(o, order(w)) {
						continue
					}
					kept[k] = v
					want[k] = evRow{Status: v.Status, TS: v.TS.Truncate(time.Microsecond), Deleted: v.Op == "-D"}
				}
				assert.Equal(t, want, fx.evTable("ver"), "seed %d", seed)
			}
		})
	}
}

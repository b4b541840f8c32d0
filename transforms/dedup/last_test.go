package dedup_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/teststream"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/stats"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/testing/deduptest"
	"github.com/beamdedup/beamdedup/transforms/deadletter"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// orderEvent is seed 003's order-status event.
type orderEvent struct {
	Op      string    `beam:"op"`
	OrderID string    `beam:"order_id"`
	Status  string    `beam:"status"`
	TS      time.Time `beam:"ts"`
	Seq     int64     `beam:"seq"`
}

func init() {
	beam.RegisterType(reflectType[orderEvent]())
	register.Function1x1(formatOrder)
	register.Function1x1(formatChange)
	register.Function2x0(netChange)
	register.Emitter2[string, int]()
	register.Function3x0(formatNet)
	register.Emitter1[string]()
	register.Function2x1(formatTimedOrder)
}

func formatOrder(e orderEvent) string { return e.Op + " " + e.OrderID + "/" + e.Status }

func formatTimedOrder(ts beam.EventTime, e orderEvent) string {
	return fmt.Sprintf("%s %s/%s@%s", e.Op, e.OrderID, e.Status, ts.ToTime().UTC().Format("15:04"))
}

func formatChange(r changeRow) string { return r.Op + " " + r.UserName + "/" + r.Event }

// netChange turns a changelog row into (row without its kind, +1 or -1):
// summed per row, a changelog's final state is the rows at +1, whatever
// order the runner delivers the changes in.
func netChange(e orderEvent, emit func(string, int)) {
	d := 1
	if e.Op == "-U" || e.Op == "-D" {
		d = -1
	}
	emit(fmt.Sprintf("%s/%s#%d", e.OrderID, e.Status, e.Seq), d)
}

// formatNet renders a row the changelog left (net count not 0).
func formatNet(row string, n int, emit func(string)) {
	if n != 0 {
		emit(fmt.Sprintf("%s x%d", row, n))
	}
}

// finalState applies a changelog of orderEvents: the rows it leaves.
func finalState(s beam.Scope, changes beam.PCollection) beam.PCollection {
	net := stats.SumPerKey(s, beam.ParDo(s, netChange, changes))
	return beam.ParDo(s, formatNet, net)
}

func order(op, id, status string, ts time.Time, seq int64) orderEvent {
	return orderEvent{Op: op, OrderID: id, Status: status, TS: ts, Seq: seq}
}

// Seed 003: o0018 is created, paid, and the paid row is resent. KeepLast
// emits +I created, then -U created / +U paid, then nothing for the resend
// (Flink emits a -U paid / +U paid pair for it).
func TestKeepLast_Seed003OrderO0018GivesInsertThenOnePairThenNothing(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	in := streamOf(t, s,
		order("", "o0018", "created", at(10, 0), 1),
		order("", "o0018", "paid", at(10, 5), 2),
		order("", "o0018", "paid", at(10, 5), 2))
	out := dedup.KeepLast(s, in, rowspec.PartitionBy("order_id"), rowspec.OnTime("ts"), rowspec.KindColumn("op")).Rows
	passert.Equals(s, beam.ParDo(s, formatOrder, out), "+I o0018/created", "-U o0018/created", "+U o0018/paid")
	c := runLast(t, p)
	assert.Equal(t, dedup.LastCounters{RowsIn: 3, Inserts: 1, Updates: 1, DuplicatesDropped: 1, EmittedUpdateBefore: 1, EmittedUpdateAfter: 1}, deduptest.LastRowCounts(c))
	assert.Zero(t, c.Unaccounted())
}

// The same out-of-order input (arrival: t5/seq1, t1/seq3, t3/seq2) in each
// ordering mode.
func TestKeepLast_ArrivalVersusEventTimeVersusSequenceBy(t *testing.T) {
	rows := []any{
		order("", "o1", "a", at(10, 5), 1),
		order("", "o1", "b", at(10, 1), 3),
		order("", "o1", "c", at(10, 3), 2),
	}
	for _, tc := range []struct {
		name string
		opt  []dedup.Option
		want []string
		ooo  int64
	}{
		{"arrival", nil, []string{"+I o1/a", "-U o1/a", "+U o1/b", "-U o1/b", "+U o1/c"}, 0},
		{"event time", []dedup.Option{rowspec.OnTime("ts")}, []string{"+I o1/a"}, 2},
		{"sequence", []dedup.Option{rowspec.SequenceBy("seq")}, []string{"+I o1/a", "-U o1/a", "+U o1/b"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, s := beam.NewPipelineWithRoot()
			opts := append([]dedup.Option{rowspec.PartitionBy("order_id"), rowspec.KindColumn("op")}, tc.opt...)
			out := dedup.KeepLast(s, streamOf(t, s, rows...), opts...).Rows
			passert.Equals(s, beam.ParDo(s, formatOrder, out), toAny(tc.want)...)
			c := runLast(t, p)
			assert.Equal(t, tc.ooo, c.OutOfOrderDropped)
			assert.Zero(t, c.Unaccounted(), "%+v", c)
		})
	}
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// Ties in the ordering value go to the later arrival, as in Flink.
func TestKeepLast_TiesGoToTheLaterArrival(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	in := streamOf(t, s, order("", "o1", "first", at(10, 5), 7), order("", "o1", "second", at(10, 5), 7))
	out := dedup.KeepLast(s, in, rowspec.PartitionBy("order_id"), rowspec.SequenceBy("seq"), rowspec.KindColumn("op")).Rows
	passert.Equals(s, beam.ParDo(s, formatOrder, out), "+I o1/first", "-U o1/first", "+U o1/second")
	run(t, p)
}

// A changelog input: -U/-D of a stored key emit -D of the stored row and
// clear it (the +U after a -U is then +I); a retraction of an unseen key is
// ignored; an unknown kind is a dead letter.
func TestKeepLast_ChangelogInputDeletesAndReinserts(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	in := streamOf(t, s,
		changeRow{"-D", "Bob", "x"},
		changeRow{"+I", "Vas", "login"},
		changeRow{"-U", "Vas", "login"},
		changeRow{"+U", "Vas", "click"},
		changeRow{"-D", "Vas", "click"},
		changeRow{"upsert", "Vas", "?"})
	r1 := dedup.KeepLast(s, in, rowspec.PartitionBy("user_name"), rowspec.KindColumn("op"))
	out, dead := r1.Rows, r1.DeadLetters
	passert.Equals(s, beam.ParDo(s, formatChange, out), "+I Vas/login", "-D Vas/login", "+I Vas/click", "-D Vas/click")
	passert.Count(s, dead, "dead", 1)
	c := runLast(t, p)
	assert.Equal(t, dedup.LastCounters{RowsIn: 6, Inserts: 2, DeletesIn: 2, RetractionsIgnored: 1, DeadLettered: 1, EmittedDelete: 2}, deduptest.LastRowCounts(c))
}

func TestKeepLast_UpsertEmitsNoUpdateBefore(t *testing.T) {
	rows := []any{order("", "o1", "created", at(10, 0), 1), order("", "o1", "paid", at(10, 1), 2)}
	t.Run("with a kind column", func(t *testing.T) {
		p, s := beam.NewPipelineWithRoot()
		out := dedup.KeepLast(s, streamOf(t, s, rows...), rowspec.PartitionBy("order_id"), rowspec.KindColumn("op"), rowspec.Upsert()).Rows
		passert.Equals(s, beam.ParDo(s, formatOrder, out), "+I o1/created", "+U o1/paid")
		c := runLast(t, p)
		assert.Zero(t, c.EmittedUpdateBefore)
	})
	t.Run("without one the rows are emitted as they are", func(t *testing.T) {
		p, s := beam.NewPipelineWithRoot()
		out := dedup.KeepLast(s, streamOf(t, s, rows...), rowspec.PartitionBy("order_id"), rowspec.Upsert()).Rows
		passert.Equals(s, beam.ParDo(s, formatOrder, out), " o1/created", " o1/paid")
		runLast(t, p)
	})
}

// stream adds each row at its own processing-free event time and moves
// the watermark behind it, so rows arrive in order.
func timedStream(t *testing.T, s beam.Scope, rows ...orderEvent) beam.PCollection {
	t.Helper()
	ts := teststream.NewConfig()
	wm := int64(math.MinInt64)
	for _, r := range rows {
		require.NoError(t, ts.AddElements(ms(r.TS), r))
		if ms(r.TS) > wm {
			wm = ms(r.TS)
			require.NoError(t, ts.AdvanceWatermark(wm))
		}
	}
	require.NoError(t, ts.AdvanceWatermarkToInfinity())
	return teststream.Create(s, ts)
}

// StateTTL measured from the key's last accepted row, checked on arrival
// (the clock reads the row's time); with RetractOnExpiry the expired row is
// retracted before the new one is inserted.
func TestKeepLast_StateTTLAndRetractOnExpiryOnArrival(t *testing.T) {
	rows := []orderEvent{
		order("", "o1", "a", at(10, 0), 1),
		order("", "o1", "b", at(10, 4), 2),  // within 5 min of a
		order("", "o1", "c", at(10, 10), 3), // 6 min after b: expired
	}
	for _, tc := range []struct {
		retract bool
		want    []string
	}{
		{false, []string{"+I o1/a", "-U o1/a", "+U o1/b", "+I o1/c"}},
		{true, []string{"+I o1/a", "-U o1/a", "+U o1/b", "-D o1/b", "+I o1/c"}},
	} {
		t.Run(fmt.Sprintf("RetractOnExpiry=%v", tc.retract), func(t *testing.T) {
			p, s := beam.NewPipelineWithRoot()
			out := dedup.KeepLast(s, timedStream(t, s, rows...), rowspec.PartitionBy("order_id"), rowspec.KindColumn("op"),
				dedup.StateTTL(5*time.Minute), deduptest.UseClock("rowtime"), dedup.CleanupTimers(false), dedup.RetractOnExpiry(tc.retract)).Rows
			passert.Equals(s, beam.ParDo(s, formatOrder, out), toAny(tc.want)...)
			c := runLast(t, p)
			assert.Equal(t, int64(1), c.KeysExpired)
			assert.Zero(t, c.Unaccounted())
		})
	}
}

// The cleanup timer retracts an expired key's row: here the event-time
// timer of EventTimeTTL, when the watermark passes. The -D carries the
// retracted row's own time. (StateTTL's processing-time timer: below.)
func TestKeepLast_RetractOnExpiryFromTheCleanupTimer(t *testing.T) {
	for _, tc := range []struct {
		name string
		ttl  dedup.Option
	}{
		{"event time", dedup.EventTimeTTL(time.Minute)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, s := beam.NewPipelineWithRoot()
			in := timedStream(t, s, order("", "o1", "a", at(10, 0), 1), order("", "o2", "b", at(10, 0), 1))
			out := dedup.KeepLast(s, in, rowspec.PartitionBy("order_id"), rowspec.KindColumn("op"), tc.ttl, dedup.RetractOnExpiry(true)).Rows
			passert.Equals(s, beam.ParDo(s, formatTimedOrder, out), "+I o1/a@10:00", "+I o2/b@10:00", "-D o1/a@10:00", "-D o2/b@10:00")
			c := runLast(t, p)
			assert.Equal(t, int64(2), c.EmittedDelete)
			assert.Equal(t, int64(2), c.KeysExpired)
		})
	}
}

// RetractOnExpiry's processing-time form on Prism: StateTTL's cleanup timer
// fires when TestStream moves processing time past the TTL (Prism's
// synthetic clock, notes/beam-defects.md 3) and retracts the key's row, at
// the row's own time. No later row of o1 arrives, and the arrival check
// reads the wall clock, so the -D can only come from the timer.
func TestKeepLast_RetractOnExpiryFromTheProcessingTimeCleanupTimer(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	ts := teststream.NewConfig()
	require.NoError(t, ts.AddElements(1000, order("", "o1", "a", at(10, 0), 1)))
	require.NoError(t, ts.AdvanceWatermark(1000))
	ts.AdvanceProcessingTime(int64(6 * time.Minute / time.Millisecond))
	require.NoError(t, ts.AdvanceWatermarkToInfinity())
	out := dedup.KeepLast(s, teststream.Create(s, ts), rowspec.PartitionBy("order_id"), rowspec.OnTime("ts"), rowspec.KindColumn("op"),
		dedup.StateTTL(5*time.Minute), dedup.RetractOnExpiry(true)).Rows
	passert.Equals(s, beam.ParDo(s, formatTimedOrder, out), "+I o1/a@10:00", "-D o1/a@10:00")
	c := runLast(t, p)
	assert.Equal(t, dedup.LastCounters{RowsIn: 1, Inserts: 1, KeysExpired: 1, EmittedDelete: 1}, deduptest.LastRowCounts(c))
}

// Per key and window: each window has its own last row.
func TestKeepLast_PerKeyAndWindow(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	in := timedStream(t, s,
		order("", "o1", "a", at(10, 0), 1), order("", "o1", "b", at(10, 5), 2),
		order("", "o1", "c", at(10, 12), 3))
	w := beam.WindowInto(s, window.NewFixedWindows(10*time.Minute), in)
	out := dedup.KeepLast(s, w, rowspec.PartitionBy("order_id"), rowspec.OnTime("ts"), rowspec.KindColumn("op")).Rows
	global := beam.WindowInto(s, window.NewGlobalWindows(), beam.ParDo(s, formatOrder, out))
	passert.Equals(s, global, "+I o1/a", "-U o1/a", "+U o1/b", "+I o1/c")
	run(t, p)
}

// On bounded input KeepLast emits each key's final row once as +I (largest
// SequenceBy value, then time, then encoding); a key whose last row is a
// deletion emits that deletion as -D, so that a sink holding the key from
// before the input deletes it; the counts add up.
func TestKeepLast_BoundedInputEmitsTheFinalRowPerKeyAsInsertOrDelete(t *testing.T) {
	for _, mb := range []bool{true, false} {
		t.Run(fmt.Sprintf("MiniBatch=%v", mb), func(t *testing.T) {
			p, s := beam.NewPipelineWithRoot()
			in := beam.Create(s,
				order("+I", "o1", "created", at(10, 0), 1), order("+U", "o1", "shipped", at(10, 9), 3), order("+U", "o1", "paid", at(10, 5), 2),
				order("+I", "o2", "created", at(10, 0), 1), order("-D", "o2", "created", at(10, 1), 2))
			out := dedup.KeepLast(s, in, rowspec.PartitionBy("order_id"), rowspec.SequenceBy("seq"), rowspec.KindColumn("op"), dedup.MiniBatch(mb)).Rows
			passert.Equals(s, beam.ParDo(s, formatOrder, out), "+I o1/shipped", "-D o2/created")
			c := runLast(t, p)
			assert.Equal(t, dedup.LastCounters{RowsIn: 5, Inserts: 1, DeletesIn: 1, Superseded: 3, EmittedDelete: 1}, deduptest.LastRowCounts(c))
			assert.Equal(t, int64(2), c.Emitted())
		})
	}
}

// Bounded (merge) and stateful expansions reach the same final state on
// random inputs with a changelog and SequenceBy (distinct values per key,
// so the result does not depend on arrival order).
func TestKeepLast_BoundedEqualsTheStatefulFinalStateOnRandomInputs(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 3))
	var rows []any
	seqs := map[string][]int64{}
	for k := range 30 {
		id := fmt.Sprintf("o%d", k)
		for _, sq := range rng.Perm(1 + rng.IntN(6)) {
			seqs[id] = append(seqs[id], int64(sq))
		}
	}
	final := map[string]orderEvent{}
	for id, ss := range seqs {
		for _, sq := range ss {
			op := []string{"+I", "+U", "+U", "-D"}[rng.IntN(4)]
			r := order(op, id, fmt.Sprintf("s%d", rng.IntN(3)), at(10, rng.IntN(50)), sq)
			rows = append(rows, r)
			if f, ok := final[id]; !ok || sq > f.Seq {
				final[id] = r
			}
		}
	}
	// The stream leaves each key's live final row; bounded input emits a
	// deleted key's -D too, which deletes nothing from an empty sink.
	var live, all []any
	for id, f := range final {
		row := fmt.Sprintf("%s/%s#%d", id, f.Status, f.Seq)
		if f.Op == "-D" {
			all = append(all, row+" x-1")
			continue
		}
		live, all = append(live, row+" x1"), append(all, row+" x1")
	}
	require.NotEmpty(t, live)
	require.Greater(t, len(all), len(live))
	for _, tc := range []struct {
		name string
		opts []dedup.Option
		want []any
	}{
		{"bounded merge", nil, all},
		{"stateful", []dedup.Option{dedup.AsStream()}, live},
		{"bounded without in-bundle merge", []dedup.Option{dedup.MiniBatch(false)}, all},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, s := beam.NewPipelineWithRoot()
			opts := append([]dedup.Option{rowspec.PartitionBy("order_id"), rowspec.SequenceBy("seq"), rowspec.KindColumn("op")}, tc.opts...)
			out := dedup.KeepLast(s, beam.Create(s, rows...), opts...).Rows
			passert.Equals(s, finalState(s, out), tc.want...)
			c := runLast(t, p)
			assert.Zero(t, c.Unaccounted(), "%+v", c)
		})
	}
}

func TestKeepLast_NullSequenceValueIsDeadLettered(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	in := streamOf(t, s, seqRow{"a", ver(1), "x"}, seqRow{"a", nil, "null"})
	r2 := dedup.KeepLast(s, in, rowspec.PartitionBy("id"), rowspec.SequenceBy("version"), rowspec.Upsert())
	out, dead := r2.Rows, r2.DeadLetters
	passert.Equals(s, beam.ParDo(s, formatSeqRow, out), "a/x")
	passert.Equals(s, dead, deadletter.DeadLetter{Row: `{"id":"a","version":null,"tag":"null"}`, Reason: `SequenceBy column "version" is NULL`, Transform: "KeepLast"})
	c := runLast(t, p)
	assert.Equal(t, dedup.LastCounters{RowsIn: 2, Inserts: 1, DeadLettered: 1}, deduptest.LastRowCounts(c))
}

func TestKeepLast_ConstructionErrorsNameTheFix(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []dedup.Option
		want string
	}{
		{"no kind column and no Upsert", nil, "KindColumn"},
		{"RetractOnExpiry without retention", []dedup.Option{rowspec.KindColumn("op"), dedup.RetractOnExpiry(true)}, "needs StateTTL or EventTimeTTL"},
		{"RetractOnExpiry without a kind column", []dedup.Option{rowspec.Upsert(), dedup.StateTTL(time.Minute), dedup.RetractOnExpiry(true)}, "kind column"},
		{"a kind column of the wrong type", []dedup.Option{rowspec.KindColumn("seq")}, "must be a string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, s := beam.NewPipelineWithRoot()
			_, err := dedup.TryKeepLast(s, beam.Create(s, orderEvent{}), tc.opts...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.True(t, strings.HasPrefix(err.Error(), "dedup.KeepLast: "), err.Error())
		})
	}
	for _, o := range []dedup.Option{rowspec.Upsert(), rowspec.Spec{Upsert: true}, dedup.RetractOnExpiry(true)} {
		_, s := beam.NewPipelineWithRoot()
		_, err := dedup.TryKeepFirst(s, beam.Create(s, orderEvent{}), o)
		assert.ErrorContains(t, err, "is a KeepLast option")
	}
}

// Result.Spec says what KeepLast emitted, so that a sink given it writes
// the rows as they are meant: a changelog by its kind column, upserts as
// upserts, and given back to KeepLast as an option it builds the same
// KeepLast.
func TestKeepLast_ResultSpecDescribesItsOutput(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []dedup.Option
		want rowspec.Spec
	}{
		{"changelog", []dedup.Option{rowspec.PartitionBy("order_id"), rowspec.OnTime("ts"), rowspec.KindColumn("op")},
			rowspec.Spec{Key: []string{"order_id"}, OnTime: "ts", Kind: "op"}},
		{"upserts", []dedup.Option{rowspec.PartitionBy("order_id"), rowspec.SequenceBy("seq"), rowspec.Upsert()},
			rowspec.Spec{Key: []string{"order_id"}, SequenceBy: "seq", Upsert: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, s := beam.NewPipelineWithRoot()
			in := beam.Create(s, orderEvent{})
			res := dedup.KeepLast(s, in, tc.opts...)
			assert.Equal(t, tc.want, res.Spec)
			again, err := dedup.TryKeepLast(s, in, res.Spec)
			require.NoError(t, err)
			assert.Equal(t, res.Spec, again.Spec)
		})
	}
}

// KV input: the key is K; V carries the kind column.
func TestKeepLast_KVInput_KeepsTheLastValuePerKey(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	in := streamOf(t, s, order("", "o1", "created", at(10, 0), 1), order("", "o1", "paid", at(10, 1), 2))
	kvs := beam.ParDo(s, keyByOrder, in)
	out := dedup.KeepLast(s, kvs, rowspec.KindColumn("op")).Rows
	passert.Equals(s, beam.ParDo(s, formatOrderKV, out), "o1: +I created", "o1: -U created", "o1: +U paid")
	run(t, p)
}

func keyByOrder(e orderEvent) (string, orderEvent) { return e.OrderID, e }

func formatOrderKV(k string, e orderEvent) string { return k + ": " + e.Op + " " + e.Status }

func init() {
	register.Function1x2(keyByOrder)
	register.Function2x1(formatOrderKV)
}

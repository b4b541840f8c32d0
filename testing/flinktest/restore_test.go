package flinktest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/internal/flinkopts"
	"github.com/beamdedup/beamdedup/internal/jobrun"
	"github.com/beamdedup/beamdedup/testing/flinktest"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// restoreRow is a tick of the restore test as a row: even ticks resend
// one of ten "old" keys, all seen in the first four seconds; odd ticks
// make "new" keys, each on four ticks 0.8 s apart, so that some are first
// seen after any savepoint. Ts is the tick's time plus eventLead: an
// event-time step holds a key's candidate that long before the watermark
// reaches it. Op is KeepLast's kind column.
type restoreRow struct {
	Key string    `beam:"key" json:"key"`
	N   int64     `beam:"n" json:"n"`
	Op  string    `beam:"op" json:"op,omitempty"`
	Ts  time.Time `beam:"ts" json:"-"`
}

const eventLead = 3 * time.Second

// keyOf is the key of tick n.
func keyOf(n int64) string {
	if n%2 == 1 {
		return fmt.Sprintf("new%04d", n/8)
	}
	return fmt.Sprintf("old%d", n/2%10)
}

// toRestoreRow is tick n of the restore stream as a row; the ticks past
// restoreTicks make none.
func toRestoreRow(et beam.EventTime, n int64, emit func(restoreRow)) {
	if n < restoreTicks {
		emit(restoreRow{Key: keyOf(n), N: n, Ts: et.ToTime().Add(eventLead)})
	}
}

// addedStep is a step a new version of the pipeline puts before its dedup
// steps.
func addedStep(r restoreRow) restoreRow { return r }

func init() {
	registerTypes(restoreRow{})
	register.Function3x0(toRestoreRow)
	register.Emitter1[restoreRow]()
	register.Function1x1(addedStep)
}

// The restore test's schedule: a tick every restoreEvery; the TTL step's
// retention, longer than a stop and a restore take; WindowFirst's windows.
const (
	restoreEvery  = 200 * time.Millisecond
	restoreTTL    = 30 * time.Second
	restoreWindow = 10 * time.Second
)

// restoreTicks are the ticks whose rows the restore test reads, until the
// TTL step's old keys expired after the restore. Its source ticks on past
// them (their rows dropped) for longer than the test, so that no job of
// it ends by itself: the project's job server ends a job whose sources
// have ended, and at that end of input Beam's runner fires the TTL step's
// processing-time timers at once, again and again while the step sets
// them anew (as a drain does), and a stop with a savepoint races the end.
const restoreTicks = int64((restoreTTL + 15*time.Second) / restoreEvery)

// The restore test of the spec (seed 000, §6) on a real savepoint, with
// every kind of state the library keeps: a stream of ticks into a
// watermarkless, an event-time and a processing-time-TTL KeepFirst, a
// KeepLast and a WindowFirst, at parallelism 1 with checkpoints, stopped
// with a savepoint mid-stream and submitted again from it, the same
// pipeline with the same UIDs. Each subtest is one of the spec's cases,
// asserted on the rows of both jobs (collected in this process: LOOPBACK)
// and on the second job's counters. The last two submit a new version of
// the pipeline from the same savepoint: a step added before the dedup
// steps (refused: their state is not found), and one added after them
// (restored).
func TestRestore_FromASavepointEveryStepKeepsItsStateAcrossTheStop(t *testing.T) {
	flinktest.SharedCluster(t) // started before the ticks' clock
	// The ticks begin once the first job has surely started and last until
	// the TTL step's old keys expired after the restore.
	begin := time.Now().Add(8 * time.Second)
	end := begin.Add(time.Duration(restoreTicks)*restoreEvery + 10*time.Minute)
	total := restoreTicks
	name := func(job int, step string) string { return fmt.Sprintf("restore-%d-%s", job, step) }
	steps := []string{"arrival", "evented", "ttl", "last", "windowed"}
	// build builds the pipeline of a job, as it is or with a step added
	// before or after the dedup steps.
	build := func(job int, added string) *beam.Pipeline {
		p, s := beam.NewPipelineWithRoot()
		rows := beam.ParDo(s, toRestoreRow, flinktest.Ticks(s, begin, end, restoreEvery))
		if added == "before" {
			rows = beam.ParDo(s.Scope("Added"), addedStep, rows)
		}
		beam.ParDo0(s.Scope("ReadRows"), &wallCollectFn{Name: name(job, "read")}, rows)
		out := map[string]beam.PCollection{
			"arrival": dedup.KeepFirst(s, rows, rowspec.PartitionBy("key"), dedup.UID("arrival")).Rows,
			"evented": dedup.KeepFirst(s, rows, rowspec.PartitionBy("key"), rowspec.OnTime("ts"), dedup.UID("evented")).Rows,
			"ttl": dedup.KeepFirst(s, rows, rowspec.PartitionBy("key"), dedup.StateTTL(restoreTTL),
				dedup.ResetTTLOnDuplicate(false), dedup.UID("ttl")).Rows,
			"last": dedup.KeepLast(s, rows, rowspec.PartitionBy("key"), rowspec.KindColumn("op"), dedup.UID("last")).Rows,
			"windowed": dedup.WindowFirst(s, beam.WindowInto(s, window.NewFixedWindows(restoreWindow), rows),
				rowspec.PartitionBy("key"), dedup.UID("windowed")).Rows,
		}
		for _, step := range steps {
			beam.ParDo0(s.Scope(step+"Out"), &wallCollectFn{Name: name(job, step)}, out[step])
		}
		if added == "after" {
			beam.ParDo0(s.Scope("AddedOut"), &wallCollectFn{Name: name(job, "added")}, beam.ParDo(s.Scope("Added"), addedStep, out["arrival"]))
		}
		return p
	}
	// first and lastOf are each key's first and last ticks, windows each
	// key's windows' first.
	first, lastOf := map[string]int64{}, map[string]int64{}
	windows := map[keyWindow]int64{}
	for n := range total {
		k := keyOf(n)
		if !has(first, k) {
			first[k] = n
		}
		lastOf[k] = n
		if kw := (keyWindow{k, windowOf(begin, n)}); !has(windows, kw) {
			windows[kw] = n
		}
	}
	o := jobrun.Options{StallLimit: -1, Flink: flinkopts.Options{Streaming: true, CheckpointingInterval: 2 * time.Second, MaxParallelism: 8}}
	ctx := context.Background()

	j1 := startJob(t, build(1, ""), o)
	flinkJob(t, j1)
	// The stop comes 40 ticks in, at least 20 ticks (4 s) before the end of
	// the window of the newest tick read, so that a WindowFirst window is
	// open at the savepoint: at a window's last tick the source's
	// watermark may already have closed it.
	flinktest.Await(t, 3*time.Minute, "40 ticks read by the first job, the newest 20 or more before its window's end", func() bool {
		read := rowsIn(t, wallRowsOf(name(1, "read")))
		if len(read) < 40 {
			return false
		}
		n := slices.MaxFunc(read, func(a, b outRow) int { return int(a.N - b.N) }).N
		return windowOf(begin, n) == windowOf(begin, n+20)
	})
	stopAt := time.Now()
	path, err := j1.StopWithSavepoint(ctx, "", time.Minute)
	require.NoError(t, err)
	_, err = j1.Wait()
	require.NoError(t, err, "a job stopped with a savepoint ends without an error")
	stopTook := time.Since(stopAt)

	o.Flink.SavepointPath = path
	j2 := startJob(t, build(2, ""), o)
	id2 := flinkJob(t, j2)
	cs, err := checkpointsOf(t, id2)
	require.NoError(t, err)
	require.NotNil(t, cs.Latest.Restored, "the second job restored a savepoint")
	assert.True(t, cs.Latest.Restored.IsSavepoint)
	assert.Equal(t, path, cs.Latest.Restored.ExternalPath)
	flinktest.Await(t, time.Minute, "a tick read by the second job", func() bool { return len(wallRowsOf(name(2, "read"))) > 0 })
	restoreTook := time.Since(stopAt)
	read1 := rowsIn(t, wallRowsOf(name(1, "read")))
	// The second job is stopped once every tick is read and out of each
	// step (the watermark, past the last tick, has closed every event-time
	// candidate and window). It is stopped as it is, not drained: a drain
	// ends each step's input, and Beam's runner then fires every
	// processing-time timer at once, again and again while the TTL step
	// sets them anew (the stop did not complete in 2 minutes).
	flinktest.Await(t, 3*time.Minute, "every tick read and out of each step", func() bool {
		if int64(len(read1)+len(wallRowsOf(name(2, "read")))) < total {
			return false
		}
		evented, ttl, win := map[string]bool{}, 0, map[keyWindow]bool{}
		cur := map[string]int64{}
		for _, job := range []int{1, 2} {
			for _, r := range rowsIn(t, wallRowsOf(name(job, "evented"))) {
				evented[r.Key] = true
			}
			for _, r := range rowsIn(t, wallRowsOf(name(job, "windowed"))) {
				win[keyWindow{r.Key, windowOf(begin, r.N)}] = true
			}
			for _, r := range rowsIn(t, wallRowsOf(name(job, "last"))) {
				cur[r.Key] = r.N
			}
		}
		for _, r := range rowsIn(t, wallRowsOf(name(2, "ttl"))) {
			if strings.HasPrefix(r.Key, "old") {
				ttl++
			}
		}
		return len(evented) == len(first) && len(win) == len(windows) && ttl >= 10 && maps.Equal(cur, lastOf)
	})
	_, err = j2.StopWithSavepoint(ctx, "", time.Minute)
	require.NoError(t, err)
	pr := waitMetrics(t, j2)
	read2 := rowsIn(t, wallRowsOf(name(2, "read")))

	byN := func(a, b outRow) int { return int(a.N - b.N) }
	require.NotEmpty(t, read1, "ticks read before the stop")
	require.NotEmpty(t, read2, "ticks read after the restore")
	last1 := slices.MaxFunc(read1, byN).N
	require.Less(t, last1, total-40, "the first job read nearly every tick before its stop: the test needs ticks after it")
	assert.Equal(t, last1+1, slices.MinFunc(read2, byN).N, "the restored job reads on from the first job's last tick")
	var all []int64
	for _, r := range append(slices.Clone(read1), read2...) {
		all = append(all, r.N)
	}
	slices.Sort(all)
	assert.Equal(t, seq(total), all, "every tick read once, by one of the jobs")
	t.Logf("the first job read ticks 0-%d of %d; stop with a savepoint %v, first tick read after the restore %v after the stop (load %s)",
		last1, total, stopTook.Round(100*time.Millisecond), restoreTook.Round(100*time.Millisecond), load())

	// readAt is when a tick was read.
	readAt := map[int64]time.Time{}
	for _, r := range append(slices.Clone(read1), read2...) {
		readAt[r.N] = r.At
	}
	outs := func(step string) ([]outRow, []outRow) {
		return rowsIn(t, wallRowsOf(name(1, step))), rowsIn(t, wallRowsOf(name(2, step)))
	}
	seenBefore := func(k string) bool { return first[k] <= last1 }

	t.Run("a key seen before the savepoint and resent after it is dropped and counted", func(t *testing.T) {
		for _, step := range []string{"arrival", "evented", "ttl"} {
			out1, out2 := outs(step)
			for _, r := range out1 {
				if strings.HasPrefix(r.Key, "old") {
					assert.Equal(t, first[r.Key], r.N, "%s: %s's first row from the first job", step, r.Key)
				}
			}
			for _, r := range out2 {
				if step == "ttl" && strings.HasPrefix(r.Key, "old") {
					continue // expired: the TTL case
				}
				assert.False(t, slices.ContainsFunc(out1, func(o outRow) bool { return o.Key == r.Key }),
					"%s: %s came out of both jobs", step, r.Key)
			}
		}
		resent := 0
		for _, r := range read2 {
			if seenBefore(r.Key) {
				resent++
			}
		}
		_, out2 := outs("arrival")
		c := dedup.CountersOf(pr, "arrival")
		assert.Equal(t, int64(len(read2)), c.RowsIn, "arrival: rows in after the restore")
		assert.Equal(t, int64(len(out2)), c.Emitted, "arrival: emitted after the restore")
		assert.Equal(t, c.RowsIn-c.Emitted, c.DuplicatesDropped, "arrival: every other row dropped")
		assert.GreaterOrEqual(t, c.DuplicatesDropped, int64(resent), "arrival: the resends of keys seen before the savepoint among them")
		assert.Positive(t, resent)
		t.Logf("arrival after the restore: %d rows in, %d emitted, %d dropped, %d of them resends of keys seen before the savepoint",
			c.RowsIn, c.Emitted, c.DuplicatesDropped, resent)
	})

	t.Run("a key first seen after the savepoint is emitted by the second job", func(t *testing.T) {
		for _, step := range []string{"arrival", "evented", "ttl"} {
			_, out2 := outs(step)
			got := map[string]int64{}
			for _, r := range out2 {
				if !seenBefore(r.Key) {
					got[r.Key] = r.N
				}
			}
			want := map[string]int64{}
			for k, n := range first {
				if n > last1 {
					want[k] = n
				}
			}
			assert.Equal(t, want, got, "%s: the keys first seen after the savepoint, their first rows", step)
			assert.NotEmpty(t, want)
		}
	})

	t.Run("an event-time candidate pending at the savepoint is emitted once after the restore", func(t *testing.T) {
		out1, out2 := outs("evented")
		kept := map[string]int64{}
		pending := 0
		for _, r := range append(slices.Clone(out1), out2...) {
			_, twice := kept[r.Key]
			assert.False(t, twice, "%s emitted twice", r.Key)
			kept[r.Key] = r.N
		}
		for _, r := range out2 {
			if seenBefore(r.Key) {
				pending++
				assert.LessOrEqual(t, r.N, last1, "%s's candidate was read by the first job", r.Key)
			}
		}
		assert.Equal(t, first, kept, "every key once across the two jobs, its earliest row")
		assert.Positive(t, pending, "candidates pending at the savepoint, emitted by the second job")
		// The second job's counters: the pending candidates came in
		// before the savepoint and out after it.
		c := dedup.CountersOf(pr, "evented")
		assert.Equal(t, int64(len(read2)), c.RowsIn, "evented: rows in after the restore")
		assert.Equal(t, int64(len(out2)), c.Emitted, "evented: emitted after the restore")
		assert.Equal(t, -int64(pending), c.Pending(), "evented: the candidates read before the savepoint, emitted after it")
		t.Logf("evented: %d keys by the first job, %d by the second, %d of them pending at the savepoint", len(out1), len(out2), pending)
	})

	t.Run("a processing-time TTL pending across the savepoint expires as configured after the restore", func(t *testing.T) {
		out1, out2 := outs("ttl")
		// Each old key's period began when the first job read its first
		// row, and ends restoreTTL later: its rows read before then are
		// dropped by the restored state, the first read after then is
		// emitted. The step reads a row up to a bundle after its source
		// (slack).
		const slack = 3 * time.Second
		const period = 20 * restoreEvery // an old key's rows
		for i := range 10 {
			k := fmt.Sprintf("old%d", i)
			began := readAt[first[k]]
			var again []outRow
			for _, r := range out2 {
				if r.Key == k {
					again = append(again, r)
				}
			}
			require.Len(t, again, 1, "%s emitted once after its period ended", k)
			at := readAt[again[0].N]
			assert.WithinRange(t, at, began.Add(restoreTTL-slack), began.Add(restoreTTL+period+slack),
				"%s's new period begins at its first row read %v after the first period began (read at %v)", k, at.Sub(began), began)
			dropped := 0
			for _, r := range read2 {
				if r.Key == k && r.N < again[0].N {
					dropped++
				}
			}
			assert.Positive(t, dropped, "%s: rows read after the restore and before the TTL ended, dropped by the restored state", k)
		}
		assert.Len(t, out1, len(rowsIn(t, wallRowsOf(name(1, "arrival")))), "ttl: the first job emits what arrival does")
		c := dedup.CountersOf(pr, "ttl")
		assert.Equal(t, c.RowsIn-c.Emitted, c.DuplicatesDropped, "ttl: every row emitted or dropped")
		t.Logf("ttl: counters after the restore %+v", c)
	})

	t.Run("KeepLast's changelog continues with -U of the row held before the savepoint, then +U", func(t *testing.T) {
		out1, out2 := outs("last")
		held := map[string]int64{}
		for _, r := range out1 {
			if r.Op != "-U" {
				held[r.Key] = r.N
			}
		}
		firstAfter := map[string][]outRow{}
		for _, r := range out2 {
			if len(firstAfter[r.Key]) < 2 {
				firstAfter[r.Key] = append(firstAfter[r.Key], r)
			}
		}
		continued := 0
		for k, n := range held {
			rs := firstAfter[k]
			if len(rs) == 0 {
				continue // not seen again
			}
			require.Len(t, rs, 2, "%s: a change after the restore", k)
			assert.Equal(t, outRow{Key: k, N: n, Op: "-U"}, rs[0].strip(), "%s: -U of the row held at the savepoint", k)
			assert.Equal(t, "+U", rs[1].Op, "%s: then +U", k)
			continued++
		}
		assert.GreaterOrEqual(t, continued, 10, "the old keys' changelogs continue")
		// The whole changelog: +I once per key, each -U retracting the row
		// last emitted, and each key's last tick at the end.
		cur := map[string]int64{}
		for _, r := range append(slices.Clone(out1), out2...) {
			n, ok := cur[r.Key]
			switch r.Op {
			case "+I":
				assert.False(t, ok, "%s: +I of a key held", r.Key)
				cur[r.Key] = r.N
			case "-U":
				assert.True(t, ok && n == r.N, "%s: -U of %d, the key holds %d", r.Key, r.N, n)
				delete(cur, r.Key)
			case "+U":
				assert.False(t, ok, "%s: +U without its -U", r.Key)
				cur[r.Key] = r.N
			default:
				t.Errorf("%s: kind %q", r.Key, r.Op)
			}
		}
		assert.Equal(t, lastOf, cur, "each key's last row")
		c := dedup.LastCountersOf(pr, "last")
		assert.Zero(t, c.Unaccounted(), "last: every row accounted for")
		assert.Equal(t, int64(len(out2)), c.Emitted(), "last: emitted after the restore")
	})

	t.Run("a WindowFirst window open across the savepoint emits one row once", func(t *testing.T) {
		out1, out2 := outs("windowed")
		got := map[keyWindow]int64{}
		for _, r := range append(slices.Clone(out1), out2...) {
			kw := keyWindow{r.Key, windowOf(begin, r.N)}
			assert.False(t, has(got, kw), "%v emitted twice", kw)
			got[kw] = r.N
		}
		assert.Equal(t, windows, got, "one row per key and window, its first, across the two jobs")
		open := 0
		for _, r := range out2 {
			if windowOf(begin, r.N) == windowOf(begin, last1) && r.N <= last1 {
				open++
			}
		}
		assert.Positive(t, open, "rows of the window open at the savepoint, read by the first job, emitted by the second")
	})

	// A new version of the pipeline from the same savepoint. Beam's runner
	// gives each fused stage the uid "<its input PCollection's id>/<its
	// environment>", and Beam Go numbers PCollections in the order the
	// pipeline is built, whatever the steps' names or dedup.UID: a step
	// built before the dedup steps renumbers their inputs, one built after
	// them does not.
	t.Run("a step added before the dedup steps cannot restore their state, and with allow_non_restored_state they forget", func(t *testing.T) {
		o := o
		o.Flink.SavepointPath = path
		j3 := startJob(t, build(3, "before"), o)
		_, err := j3.Wait()
		require.Error(t, err, "the new version refused")
		t.Logf("the error: %v", err)
		assert.Contains(t, err.Error(), "Cannot map checkpoint/savepoint state for operator")
		assert.Contains(t, err.Error(), "allowNonRestoredState")
		m := regexp.MustCompile(`for operator ([0-9a-f]{32})`).FindStringSubmatch(err.Error())
		require.NotNil(t, m, "the operator named")
		id1, err := j1.FlinkJobID(ctx)
		require.NoError(t, err)
		fj, err := rest(t).Job(ctx, id1)
		require.NoError(t, err)
		var named string
		for _, v := range fj.Vertices {
			if v.ID == m[1] {
				named = v.Name
			}
		}
		assert.Regexp(t, `\{(arrival|evented|ttl|last), `, named, "the state not mapped is a dedup step's (operator %s)", m[1])

		o.Flink.AllowNonRestoredState = true
		j4 := startJob(t, build(4, "before"), o)
		flinkJob(t, j4)
		flinktest.Await(t, time.Minute, "the old keys out of the watermarkless step again", func() bool {
			old := 0
			for _, r := range rowsIn(t, wallRowsOf(name(4, "arrival"))) {
				if seenBefore(r.Key) {
					old++
				}
			}
			return old >= 10
		})
		require.NoError(t, j4.Cancel())
		j4.Wait()
	})

	t.Run("a step added after the dedup steps restores their state", func(t *testing.T) {
		o := o
		o.Flink.SavepointPath = path
		j5 := startJob(t, build(5, "after"), o)
		id5 := flinkJob(t, j5)
		cs, err := checkpointsOf(t, id5)
		require.NoError(t, err)
		require.NotNil(t, cs.Latest.Restored, "the new version restored the savepoint")
		_, out2 := outs("arrival")
		flinktest.Await(t, time.Minute, "the ticks after the savepoint read again, and out of the steps", func() bool {
			return int64(len(wallRowsOf(name(5, "read")))) >= total-last1-1 &&
				len(wallRowsOf(name(5, "arrival"))) >= len(out2) && len(wallRowsOf(name(5, "added"))) >= len(out2)
		})
		_, err = j5.StopWithSavepoint(ctx, "", time.Minute)
		require.NoError(t, err)
		waitMetrics(t, j5)
		// The ticks after the savepoint, all past by now, were read again
		// at once: the restored steps emit what the second job did.
		keysOf := func(rs []outRow) []string {
			var ks []string
			for _, r := range rs {
				ks = append(ks, r.Key)
			}
			slices.Sort(ks)
			return ks
		}
		assert.Equal(t, keysOf(out2), keysOf(rowsIn(t, wallRowsOf(name(5, "arrival")))), "the keys first seen after the savepoint, and no other")
		assert.Equal(t, keysOf(out2), keysOf(rowsIn(t, wallRowsOf(name(5, "added")))), "the added step's")
	})
}

// keyWindow is a key and a WindowFirst window, by its index.
type keyWindow struct {
	key string
	w   int64
}

// windowOf is the index of tick n's window.
func windowOf(begin time.Time, n int64) int64 {
	return begin.Add(time.Duration(n)*restoreEvery).UnixMilli() / restoreWindow.Milliseconds()
}

func has[K comparable, V any](m map[K]V, k K) bool {
	_, ok := m[k]
	return ok
}

// outRow is a row as the restore test's steps emit it, with when it was
// collected.
type outRow struct {
	Key string `json:"key"`
	N   int64  `json:"n"`
	Op  string `json:"op"`
	At  time.Time
}

func (r outRow) strip() outRow { r.At = time.Time{}; return r }

// rowsIn decodes collected rows, in the order they came.
func rowsIn(t *testing.T, ws []walled) []outRow {
	t.Helper()
	out := make([]outRow, len(ws))
	for i, w := range ws {
		require.NoError(t, json.Unmarshal([]byte(w.Row), &out[i]))
		out[i].At = w.At
	}
	return out
}

// seq is 0, 1, ..., n-1.
func seq(n int64) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(i)
	}
	return out
}

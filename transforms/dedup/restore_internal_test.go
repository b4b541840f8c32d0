package dedup

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/timers"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/typex"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/util/reflectx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/coders/keycoder"
	"github.com/beamdedup/beamdedup/internal/testhook"
	"github.com/beamdedup/beamdedup/testing/statetest"
	"github.com/beamdedup/beamdedup/transforms/dedup/internal/statecoder"
	"github.com/beamdedup/beamdedup/transforms/dedup/internal/step"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// The restore test: what a Flink savepoint restore or a Dataflow update
// does to a stateful step, done to the step itself. A stream runs through
// the step's DoFn to a point; the step's state (the bytes of its cell, as
// its coder writes them: what a runner holds) and its pending timers (their
// family, tag, time and hold) are taken; a fresh DoFn instance, with a
// fresh state and timer backend holding only that, continues the stream,
// in this process and in a new one; and the output and the final state
// must be the uninterrupted run's. Beam offers no savepoint on Prism, so a
// small runner of the test's own drives the DoFn through its lifecycle
// (Setup, StartBundle, ProcessElement, OnTimer, FinishBundle), firing
// event-time timers as the watermark passes them and processing-time
// timers as its clock does.

// restoreRow is the restore test's row: its key, kind, value and time.
type restoreRow struct {
	ID string    `beam:"id"`
	Op string    `beam:"op"`
	V  string    `beam:"v"`
	TS time.Time `beam:"ts"`
}

func init() {
	beam.RegisterType(reflect.TypeFor[restoreRow]())
	testhook.RegisterClock(restoreClockName, func(time.Time) time.Time { return time.UnixMilli(restoreNow.Load()) })
}

// The restore test's processing-time clock, which its runner moves.
const restoreClockName = "restore-test"

var restoreNow atomic.Int64

// restoreEvent is one step of a stream: a bundle of rows, the watermark
// moved to wm, or the processing clock moved on by proc.
type restoreEvent struct {
	rows []restoreRow
	wm   int64
	proc time.Duration
}

// restoreCase is a mode of KeepFirst or KeepLast and a stream through it.
type restoreCase struct {
	name   string
	last   bool
	opts   []Option
	events []restoreEvent
	// want is the uninterrupted run's output: it shows the case does what
	// its name says.
	want []string
	// moments are cuts the case must have, by the events run before them,
	// each with what the snapshot then holds.
	moments []moment
}

// moment is a restore point the case covers, checked on its snapshot.
type moment struct {
	after int
	what  string
	check func(t *testing.T, s restoreSnapshot)
}

var restoreT0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func rr(op, id, v string, d time.Duration) restoreRow {
	return restoreRow{Op: op, ID: id, V: v, TS: restoreT0.Add(d)}
}
func rows(r ...restoreRow) restoreEvent   { return restoreEvent{rows: r} }
func wmAt(d time.Duration) restoreEvent   { return restoreEvent{wm: restoreT0.Add(d).UnixMilli()} }
func procBy(d time.Duration) restoreEvent { return restoreEvent{proc: d} }

// Checks of a snapshot's pending timers and cells.
func noStateOf(key string) func(*testing.T, restoreSnapshot) {
	return func(t *testing.T, s restoreSnapshot) { assert.Empty(t, s.cellOf(key), "no state of key %s yet", key) }
}
func stateOf(key string) func(*testing.T, restoreSnapshot) {
	return func(t *testing.T, s restoreSnapshot) { assert.NotEmpty(t, s.cellOf(key), "key %s has state", key) }
}
func pendingTimer(key string, tagged bool) func(*testing.T, restoreSnapshot) {
	return func(t *testing.T, s restoreSnapshot) {
		assert.True(t, s.timerOf(key, tagged), "a pending timer of key %s, a finalization %v: %+v", key, tagged, s.Timers)
	}
}
func all(checks ...func(*testing.T, restoreSnapshot)) func(*testing.T, restoreSnapshot) {
	return func(t *testing.T, s restoreSnapshot) {
		for _, c := range checks {
			c(t, s)
		}
	}
}

func restoreCases() []restoreCase {
	const m = time.Minute
	return []restoreCase{{
		name: "KeepFirst, watermarkless, no TTL",
		opts: []Option{rowspec.PartitionBy("id"), OutputDropped()},
		events: []restoreEvent{
			rows(rr("", "a", "a1", 0)),
			rows(rr("", "b", "b1", m), rr("", "a", "a2", m)),
			rows(rr("", "a", "a3", 2*m), rr("", "b", "b2", 2*m)),
		},
		want: []string{"out 10:00:00.000 a/a1", "out 10:01:00.000 b/b1", "drop 10:01:00.000 a/a2", "drop 10:02:00.000 a/a3", "drop 10:02:00.000 b/b2"},
		moments: []moment{
			{0, "before a key's first record", noStateOf("a")},
			{1, "after it", all(stateOf("a"), noStateOf("b"))},
		},
	}, {
		name: "KeepFirst, watermarkless, StateTTL (processing-time cleanup)",
		opts: []Option{rowspec.PartitionBy("id"), StateTTL(m), useClock(restoreClockName), OutputDropped()},
		events: []restoreEvent{
			rows(rr("", "a", "a1", 0)),
			rows(rr("", "b", "b1", 0), rr("", "a", "a2", 0)),
			procBy(30 * time.Second),
			rows(rr("", "a", "a3", 0)), // refreshes a's retention
			procBy(45 * time.Second),   // b's expires
			procBy(45 * time.Second),   // a's expires
			rows(rr("", "a", "a4", 0), rr("", "b", "b2", 0)),
		},
		want: []string{"out 10:00:00.000 a/a1", "out 10:00:00.000 b/b1", "drop 10:00:00.000 a/a2", "drop 10:00:00.000 a/a3",
			"out 10:00:00.000 a/a4", "out 10:00:00.000 b/b2"},
		moments: []moment{
			{0, "before a key's first record", noStateOf("a")},
			{1, "after it, a cleanup timer pending", pendingTimer("a", false)},
			{5, "a's cleanup timer pending, b's fired", all(pendingTimer("a", false), noStateOf("b"))},
		},
	}, {
		name: "KeepFirst, event time, EventTimeTTL",
		opts: []Option{rowspec.PartitionBy("id"), rowspec.OnTime("ts"), EventTimeTTL(10 * m), OutputDropped()},
		events: []restoreEvent{
			wmAt(-m),
			rows(rr("", "a", "later", 5*m)),
			rows(rr("", "a", "earlier", 3*m+500*time.Microsecond), rr("", "b", "b1", 4*m)),
			rows(rr("", "a", "µs-earlier", 3*m+100*time.Microsecond)), // in the candidate's millisecond
			wmAt(4*m + time.Millisecond),
			rows(rr("", "a", "late", 2*m)),
			wmAt(30 * m), // the keys' retention ends
			rows(rr("", "a", "again", 31*m)),
			wmAt(40 * m),
		},
		want: []string{"drop 10:05:00.000 a/later", "drop 10:03:00.000 a/earlier", "out 10:03:00.000 a/µs-earlier", "out 10:04:00.000 b/b1",
			"drop 10:02:00.000 a/late", "out 10:31:00.000 a/again"},
		moments: []moment{
			{1, "before a key's first record", noStateOf("a")},
			{2, "an event-time candidate pending", pendingTimer("a", true)},
			{4, "a replaced candidate pending, its replaced timer moved", pendingTimer("a", true)},
			{5, "after emission, a cleanup timer pending", all(stateOf("a"), pendingTimer("a", false))},
		},
	}, {
		name: "KeepLast, ordered, StateTTL and RetractOnExpiry (processing-time cleanup)",
		last: true,
		opts: []Option{rowspec.PartitionBy("id"), rowspec.KindColumn("op"), rowspec.OnTime("ts"), StateTTL(m), RetractOnExpiry(true), useClock(restoreClockName), OutputDropped()},
		events: []restoreEvent{
			rows(rr("", "a", "created", 0)),
			rows(rr("", "a", "paid", time.Second), rr("", "b", "x", 0)),
			procBy(30 * time.Second),
			rows(rr("", "a", "paid", time.Second), rr("", "a", "old", 0)),
			procBy(70 * time.Second),
			rows(rr("", "a", "shipped", 5*time.Second)),
		},
		want: []string{"out 10:00:00.000 +I a/created", "out 10:00:01.000 -U a/created", "out 10:00:01.000 +U a/paid", "out 10:00:00.000 +I b/x",
			"drop 10:00:01.000 a/paid", "drop 10:00:00.000 a/old", "out 10:00:00.000 -D b/x", "out 10:00:01.000 -D a/paid", "out 10:00:05.000 +I a/shipped"},
		moments: []moment{
			{0, "before a key's first record", noStateOf("a")},
			{1, "after it, a cleanup timer pending", all(stateOf("a"), pendingTimer("a", false))},
		},
	}, {
		name: "KeepLast, changelog, EventTimeTTL and RetractOnExpiry (event-time cleanup)",
		last: true,
		opts: []Option{rowspec.PartitionBy("id"), rowspec.KindColumn("op"), rowspec.OnTime("ts"), EventTimeTTL(10 * m), RetractOnExpiry(true), OutputDropped()},
		events: []restoreEvent{
			rows(rr("+I", "a", "created", 0)),
			rows(rr("-D", "a", "created", m)),
			rows(rr("+I", "a", "as old as the deletion", m), rr("+I", "b", "b1", 0)),
			rows(rr("+I", "a", "newer", 2*m)),
			wmAt(30 * m),
			rows(rr("+U", "a", "after", 31*m)),
			wmAt(50 * m),
		},
		want: []string{"out 10:00:00.000 +I a/created", "out 10:01:00.000 -D a/created", "drop 10:01:00.000 a/as old as the deletion",
			"out 10:00:00.000 +I b/b1", "out 10:02:00.000 +I a/newer", "out 10:00:00.000 -D b/b1", "out 10:02:00.000 -D a/newer",
			"out 10:31:00.000 +I a/after", "out 10:31:00.000 -D a/after"},
		moments: []moment{
			{0, "before a key's first record", noStateOf("a")},
			{1, "after it, a cleanup timer pending", all(stateOf("a"), pendingTimer("a", false))},
			{2, "a tombstone", stateOf("a")},
		},
	}}
}

// rowEmit is the stateful step's emitter of KV<key, row>.
type rowEmit = func(beam.EventTime, beam.T, beam.V)

// useClock is deduptest.UseClock, which this package's internal tests
// cannot import.
func useClock(name string) Option { return own("useClock", func(c *config) { c.hooks.Clock = name }) }

// TestRestore_AStepRestoredFromItsStateAndTimersContinuesAsTheUninterruptedRun
// cuts every case's stream at every boundary between its events, with the
// step's state requests waited for one by one and overlapped. The step
// overlaps them only on Beam's harness provider (step, its overlapped stateIO's vet), so on
// the test's own backend it waits for each unless told that the backend
// stands for the harness's (restoreDriver.overlap).
func TestRestore_AStepRestoredFromItsStateAndTimersContinuesAsTheUninterruptedRun(t *testing.T) {
	restoreEveryCut(t, restoreCases())
}

// TestRestore_AStepOnStatePerBucketRestoredFromItsStateAndTimersContinuesAsTheUninterruptedRun
// does the same to the step that keeps state per key-hash bucket
// (StateBuckets), every case in one bucket and in 8: a bucket's cell and
// its one timer are what a runner holds. Its rows come a bucket at a
// time, a key's rows of a bundle in time order, so the uninterrupted run's
// output is, key by key, a cell per key's handed each bundle's rows so.
func TestRestore_AStepOnStatePerBucketRestoredFromItsStateAndTimersContinuesAsTheUninterruptedRun(t *testing.T) {
	restoreEveryCut(t, bucketedRestoreCases())
}

// bucketedRestoreCases are the restore cases on state per bucket.
func bucketedRestoreCases() []restoreCase {
	var out []restoreCase
	for _, n := range []int{1, 8} {
		for _, tc := range restoreCases() {
			tc.name = fmt.Sprintf("%s, %d buckets", tc.name, n)
			tc.opts = append(slices.Clone(tc.opts), StateBuckets(n))
			out = append(out, tc)
		}
	}
	return out
}

// restoreEveryCut runs each case uninterrupted, then cut after each event
// and restored, in this process and in a new one.
func restoreEveryCut(t *testing.T, cases []restoreCase) {
	if os.Getenv(restoreChildEnv) != "" {
		restoreChild(t, cases)
		return
	}
	var work []restoreWork
	for _, overlap := range []bool{false, true} {
		for _, tc := range cases {
			t.Run(fmt.Sprintf("%s/overlapped_%v", tc.name, overlap), func(t *testing.T) {
				whole := newRestoreDriver(t, tc, nil, overlap)
				whole.run(tc.events)
				if whole.buckets > 0 {
					// A bucket's batch holds a key's rows of a bundle in time
					// order: each key's output is a cell per key's on a runner
					// that hands them so (Prism).
					perKey := tc
					perKey.opts = append(slices.Clone(tc.opts), StateBuckets(0))
					ref := newRestoreDriver(t, perKey, nil, overlap)
					ref.timeOrder = true
					ref.run(tc.events)
					assert.Equal(t, byKey(ref.out), byKey(whole.out), "the uninterrupted run, key by key")
				} else {
					assert.Equal(t, tc.want, whole.out, "the uninterrupted run")
				}
				assert.Equal(t, overlap, whole.step.Overlapping(), "the step overlapped its requests")
				final := whole.snapshot()
				for _, mo := range tc.moments {
					d := newRestoreDriver(t, tc, nil, overlap)
					d.run(tc.events[:mo.after])
					t.Run(mo.what, func(t *testing.T) { mo.check(t, d.snapshot()) })
				}
				for cut := range len(tc.events) + 1 {
					first := newRestoreDriver(t, tc, nil, overlap)
					first.run(tc.events[:cut])
					snap := first.snapshot()
					// A fresh DoFn instance and backend, in this process.
					second := newRestoreDriver(t, tc, &snap, overlap)
					second.run(tc.events[cut:])
					assert.Equal(t, whole.out, slices.Concat(first.out, second.out), "restored after event %d", cut)
					assert.Equal(t, final, second.snapshot(), "restored after event %d: the final state and timers", cut)
					work = append(work, restoreWork{Case: tc.name, Overlap: overlap, Cut: cut, Snapshot: snap, Before: first.out, Want: whole.out, Final: final})
				}
			})
		}
	}
	t.Run("in a new process", func(t *testing.T) { restoreInANewProcess(t, work) })
}

// byKey is each key's output rows, in their order.
func byKey(out []string) map[string][]string {
	m := map[string][]string{}
	for _, o := range out {
		f := strings.Fields(o)
		id, _, _ := strings.Cut(f[len(f)-1], "/")
		m[id] = append(m[id], o)
	}
	return m
}

// A new process: this test binary again, restoring every case at every cut
// from the snapshots written to a file, with nothing else in common.
const restoreChildEnv = "BEAMDEDUP_RESTORE_TEST_WORK"

// restoreWork is one restore for the new process, and what it must give.
type restoreWork struct {
	Case     string
	Overlap  bool
	Cut      int
	Snapshot restoreSnapshot
	Before   []string // the output before the cut
	Want     []string
	Final    restoreSnapshot
	// Set by the new process.
	After      []string
	FinalAfter restoreSnapshot
}

func restoreInANewProcess(t *testing.T, work []restoreWork) {
	path := t.TempDir() + "/work.json"
	b, err := json.Marshal(work)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, b, 0o600))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	test, _, _ := strings.Cut(t.Name(), "/")
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), restoreChildEnv+"="+path)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the new process:\n%s", out)
	b, err = os.ReadFile(path)
	require.NoError(t, err)
	var done []restoreWork
	require.NoError(t, json.Unmarshal(b, &done))
	require.Len(t, done, len(work))
	for _, w := range done {
		assert.Equal(t, w.Want, slices.Concat(w.Before, w.After), "%s (overlapped %v): restored after event %d in a new process", w.Case, w.Overlap, w.Cut)
		assert.Equal(t, w.Final, w.FinalAfter, "%s (overlapped %v): restored after event %d in a new process: the final state and timers", w.Case, w.Overlap, w.Cut)
	}
}

// restoreChild is the new process's side: it continues each stream from
// its snapshot and writes what it gave back into the file.
func restoreChild(t *testing.T, all []restoreCase) {
	path := os.Getenv(restoreChildEnv)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var work []restoreWork
	require.NoError(t, json.Unmarshal(b, &work))
	cases := map[string]restoreCase{}
	for _, tc := range all {
		cases[tc.name] = tc
	}
	for i, w := range work {
		tc, ok := cases[w.Case]
		require.True(t, ok, w.Case)
		d := newRestoreDriver(t, tc, &w.Snapshot, w.Overlap)
		d.run(tc.events[w.Cut:])
		work[i].After, work[i].FinalAfter = d.out, d.snapshot()
	}
	b, err = json.Marshal(work)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, b, 0o600))
}

// restoreSnapshot is a step's state and pending timers, as a runner holds
// them: per key (its encoded bytes), the elements of the step's state cell
// as its coder encodes them, and each timer with its tag; and where the
// stream stood (the watermark, the processing clock).
type restoreSnapshot struct {
	Watermark, Now int64
	Cells          []restoreCell
	Timers         []restoreTimer
	// Buckets is the step's bucket count when it keeps state per bucket:
	// a cell is then a bucket's, its key the bucket's.
	Buckets int `json:",omitempty"`
}

type restoreCell struct {
	Key      []byte
	Elements [][]byte
}

type restoreTimer struct {
	Key  []byte
	Tag  string
	Fire int64 // event time; for processing time, the runner's clock
	Hold int64
}

// cellOf is what the snapshot holds of key: its cell's elements, or, per
// bucket, its entry's state in its bucket's cell.
func (s restoreSnapshot) cellOf(key string) [][]byte {
	if s.Buckets > 0 {
		if e, ok := s.entryOf(key); ok {
			return [][]byte{e.State}
		}
		return nil
	}
	for _, c := range s.Cells {
		if bytes.Equal(c.Key, restoreKey(key)) {
			return c.Elements
		}
	}
	return nil
}

// entryOf is key's current entry in its bucket's cell.
func (s restoreSnapshot) entryOf(key string) (e statecoder.Entry, ok bool) {
	bucket := step.BucketKey(restoreKey(key), s.Buckets)
	for _, c := range s.Cells {
		if !bytes.Equal(c.Key, bucket) {
			continue
		}
		// The cell's elements as its coder encodes them (a length, then
		// the segment).
		dec := beam.NewElementDecoder(reflect.TypeFor[[]byte]())
		var segs [][]byte
		for _, el := range c.Elements {
			v, err := dec.Decode(bytes.NewReader(el))
			if err != nil {
				panic(err)
			}
			segs = append(segs, v.([]byte))
		}
		if _, err := statecoder.FoldSegments(segs, s.Buckets, func(en *statecoder.Entry) {
			if bytes.Equal(en.Key, restoreKey(key)) {
				e, ok = *en, len(en.State) > 0
			}
		}); err != nil {
			panic(err)
		}
	}
	return e, ok
}

// timerOf reports whether key has a pending timer, a finalization
// (tagged, per key) or a cleanup: per bucket, its entry's, and its
// bucket's timer that stands for it (bucketTimerOf).
func (s restoreSnapshot) timerOf(key string, tagged bool) bool {
	if s.Buckets > 0 {
		return s.bucketTimerOf(key, tagged)
	}
	for _, tm := range s.Timers {
		if bytes.Equal(tm.Key, restoreKey(key)) && (tm.Tag != "") == tagged {
			return true
		}
	}
	return false
}

// bucketTimerOf reports whether key's entry in its bucket's table has a
// pending timer (a finalization if tagged, else a cleanup) and its bucket
// a timer that stands for it: in event time the one at the entry's time,
// tagged with that time; in processing time the bucket's one (untagged),
// due at or before the entry's time, when its firing finds the keys due.
func (s restoreSnapshot) bucketTimerOf(key string, tagged bool) bool {
	e, ok := s.entryOf(key)
	kind := statecoder.CleanupTimer
	if tagged {
		kind = statecoder.FinalizeTimer
	}
	if !ok || e.Timer != kind {
		return false
	}
	bucket := step.BucketKey(restoreKey(key), s.Buckets)
	for _, tm := range s.Timers {
		if !bytes.Equal(tm.Key, bucket) {
			continue
		}
		if tm.Tag == step.BucketTimerTag(e.At) && tm.Fire == e.At || tm.Tag == "" && tm.Fire <= e.At {
			return true
		}
	}
	return false
}

// The restore test's check of a pending timer per bucket holds for a key
// only with the bucket's timer that stands for the key's own: another
// key's of the bucket, at another time, does not do.
func TestRestoreSnapshot_APendingTimerPerBucketIsTheKeysOwn(t *testing.T) {
	seg := statecoder.AppendSegmentHeader(nil, 0, 1)
	for key, at := range map[string]int64{"a": 5000, "b": 9000} {
		seg = statecoder.AppendEntry(seg, &statecoder.Entry{Key: restoreKey(key), State: statecoder.Encode(&statecoder.State{Phase: statecoder.Emitted, ExpireAt: at}), Timer: statecoder.CleanupTimer, At: at})
	}
	var el bytes.Buffer
	require.NoError(t, beam.NewElementEncoder(reflect.TypeFor[[]byte]()).Encode(seg, &el))
	bucket := step.BucketKey(restoreKey("a"), 1)
	for _, tc := range []struct {
		name   string
		timers []restoreTimer
		a, b   bool
	}{
		{"event time, b's timer only", []restoreTimer{{Key: bucket, Tag: step.BucketTimerTag(9000), Fire: 9000}}, false, true},
		{"event time, both", []restoreTimer{{Key: bucket, Tag: step.BucketTimerTag(5000), Fire: 5000}, {Key: bucket, Tag: step.BucketTimerTag(9000), Fire: 9000}}, true, true},
		{"event time, a timer at a time no key's is", []restoreTimer{{Key: bucket, Tag: step.BucketTimerTag(7000), Fire: 7000}}, false, false},
		{"processing time, after a's", []restoreTimer{{Key: bucket, Fire: 9000}}, false, true},
		{"processing time, at a's", []restoreTimer{{Key: bucket, Fire: 5000}}, true, true},
		{"another bucket's", []restoreTimer{{Key: []byte{0, 0, 0, 9}, Fire: 5000}}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := restoreSnapshot{Buckets: 1, Cells: []restoreCell{{Key: bucket, Elements: [][]byte{el.Bytes()}}}, Timers: tc.timers}
			assert.Equal(t, tc.a, s.timerOf("a", false), "a")
			assert.Equal(t, tc.b, s.timerOf("b", false), "b")
			assert.False(t, s.timerOf("b", true), "b's is a cleanup, not a finalization")
		})
	}
}

// restoreKey is a row's key as the keying step encodes it.
func restoreKey(id string) []byte {
	enc, err := keycoder.New(reflect.TypeFor[restoreRow](), []string{"id"})
	if err != nil {
		panic(err)
	}
	return enc.Append(nil, reflect.ValueOf(restoreRow{ID: id}))
}

// restoreDriver is the restore test's runner for one stateful DoFn.
type restoreDriver struct {
	t    *testing.T
	fn   reflect.Value
	step *step.Step
	// The DoFn's state cell, its element coder, its timer family.
	cellID   string
	enc      beam.ElementEncoder
	dec      beam.ElementDecoder
	family   string
	proc     bool
	hasTimer bool
	// buckets: the step keeps state per bucket, its rows batched per
	// bucket by batcher, as the expansion's step before it does.
	buckets int
	batcher *step.BucketRows
	// timeOrder: the driver hands the step each bundle's rows in element
	// time order, rows of one time in arrival order, as Prism hands a key's
	// rows to a stateful step (and as a bucket's batch holds them);
	// otherwise in arrival order, as Flink does.
	timeOrder bool

	// req follows the state requests and guards cells (and the coders)
	// against the step's overlapped ones, which come from goroutines of
	// its own.
	req    *statetest.Requests
	cells  map[string][][]byte
	timers map[[2]string]restoreTimer // by key and tag
	wm     int64
	now    int64
	out    []string
	ctx    context.Context
}

// newRestoreDriver sets up a fresh DoFn of the case's mode, and a backend
// holding from (nil: nothing). overlap: the step takes the backend for
// Beam's harness provider, so it overlaps its requests as on a runner
// (batched without a timer family, else its writes); otherwise it waits
// for each, as it does on any provider not the harness's.
func newRestoreDriver(t *testing.T, tc restoreCase, from *restoreSnapshot, overlap bool) *restoreDriver {
	t.Helper()
	tr := keepFirst
	if tc.last {
		tr = keepLast
	}
	c := newConfig(tc.opts, tr)
	require.NoError(t, c.validate())
	p, err := newPlan(&c, input{globalWindows: true})
	require.NoError(t, err)
	require.Equal(t, statefulExpansion, p.expansion)
	fn := newStatefulFn(&c, &p, reflect.TypeFor[[]byte](), reflect.TypeFor[restoreRow](), metricsNamespace(tr, "restore"))
	d := &restoreDriver{
		t: t, fn: reflect.ValueOf(fn), req: statetest.NewRequests(false), cells: map[string][][]byte{}, timers: map[[2]string]restoreTimer{},
		wm: int64(mtime.MinTimestamp), now: restoreT0.UnixMilli(),
		ctx: metrics.SetPTransformID(metrics.SetBundleID(context.Background(), "restore"), "dedup"), buckets: p.buckets,
	}
	if p.buckets > 0 {
		d.batcher = &step.BucketRows{RowType: beam.EncodedType{T: reflect.TypeFor[restoreRow]()}, Buckets: p.buckets}
		require.NoError(t, d.batcher.Setup())
	}
	// The cell and the timer family, from the DoFn's fields.
	v := d.fn.Elem()
	switch cell := v.FieldByName("State").Addr().Interface().(type) {
	case *state.Bag[int64]:
		d.cellID, d.enc, d.dec = cell.Key, beam.NewElementEncoder(reflect.TypeFor[int64]()), beam.NewElementDecoder(reflect.TypeFor[int64]())
	case *state.Bag[[]byte]:
		d.cellID, d.enc, d.dec = cell.Key, beam.NewElementEncoder(reflect.TypeFor[[]byte]()), beam.NewElementDecoder(reflect.TypeFor[[]byte]())
	default:
		t.Fatalf("the restore test knows no state cell %T", cell)
	}
	if f := v.FieldByName("Timer"); f.IsValid() {
		d.hasTimer = true
		switch tm := f.Interface().(type) {
		case timers.EventTime:
			d.family = tm.Family
		case timers.ProcessingTime:
			d.family, d.proc = tm.Family, true
		default:
			t.Fatalf("the restore test knows no timer %T", tm)
		}
	}
	if from != nil {
		d.wm, d.now = from.Watermark, from.Now
		for _, c := range from.Cells {
			d.cells[string(c.Key)] = slices.Clone(c.Elements)
		}
		for _, tm := range from.Timers {
			d.timers[[2]string{string(tm.Key), tm.Tag}] = tm
		}
	}
	d.call("Setup", "")
	d.step = fn.(interface{ Step() *step.Step }).Step()
	require.True(t, d.step.Overlapping(), "the step overlaps by default")
	if overlap {
		d.step.TrustProvider(reflect.TypeFor[*restoreState]())
	}
	return d
}

// snapshot is what the runner holds now, in a canonical order.
func (d *restoreDriver) snapshot() restoreSnapshot {
	s := restoreSnapshot{Watermark: d.wm, Now: d.now, Buckets: d.buckets}
	for k, els := range d.cells {
		s.Cells = append(s.Cells, restoreCell{Key: []byte(k), Elements: slices.Clone(els)})
	}
	slices.SortFunc(s.Cells, func(a, b restoreCell) int { return bytes.Compare(a.Key, b.Key) })
	for _, tm := range d.timers {
		s.Timers = append(s.Timers, tm)
	}
	slices.SortFunc(s.Timers, func(a, b restoreTimer) int {
		if c := bytes.Compare(a.Key, b.Key); c != 0 {
			return c
		}
		return strings.Compare(a.Tag, b.Tag)
	})
	return s
}

func (d *restoreDriver) run(events []restoreEvent) {
	for _, e := range events {
		switch {
		case e.rows != nil:
			d.bundle(e.rows)
		case e.wm != 0:
			d.wm = e.wm
		case e.proc != 0:
			d.now += e.proc.Milliseconds()
		}
		d.fireDue()
	}
}

// bundle runs rows through the DoFn as one bundle, each keyed and timed as
// the keying step does (its key's bytes; its OnTime value's millisecond,
// which is also its element time here); per bucket, batched as the
// expansion's step before it does, a batch an element.
func (d *restoreDriver) bundle(rows []restoreRow) {
	if d.timeOrder {
		rows = slices.Clone(rows)
		slices.SortStableFunc(rows, func(a, b restoreRow) int { return cmpInt(a.TS.UnixMilli(), b.TS.UnixMilli()) })
	}
	restoreNow.Store(d.now)
	d.req.Bundle(true)
	d.call("StartBundle", "")
	if d.buckets > 0 {
		for _, b := range d.batches(rows) {
			d.call("ProcessElement", string(b.key), reflect.ValueOf(b.key), reflect.ValueOf(b.rows))
		}
	} else {
		for _, r := range rows {
			key := string(restoreKey(r.ID))
			d.call("ProcessElement", key, reflect.ValueOf(beam.EventTime(r.TS.UnixMilli())), reflect.ValueOf(r))
		}
	}
	d.call("FinishBundle", "")
	d.req.Bundle(false)
}

// restoreBatch is a bucket's batch of a bundle's rows.
type restoreBatch struct{ key, rows []byte }

// batches are rows batched per bucket by the expansion's batching step.
func (d *restoreDriver) batches(rows []restoreRow) []restoreBatch {
	var out []restoreBatch
	emit := func(_ beam.EventTime, key, rows []byte) { out = append(out, restoreBatch{key, rows}) }
	d.batcher.StartBundle(emit)
	for _, r := range rows {
		require.NoError(d.t, d.batcher.ProcessElement(beam.EventTime(r.TS.UnixMilli()), restoreKey(r.ID), r, emit))
	}
	d.batcher.FinishBundle(emit)
	return out
}

// fireDue fires the timers due, in bundles, until none is: event-time
// timers the watermark has passed, processing-time timers the clock has
// reached, earliest first.
func (d *restoreDriver) fireDue() {
	for range 1000 {
		var due []restoreTimer
		for _, tm := range d.timers {
			if d.proc && tm.Fire <= d.now || !d.proc && tm.Fire < d.wm {
				due = append(due, tm)
			}
		}
		if len(due) == 0 {
			return
		}
		slices.SortFunc(due, func(a, b restoreTimer) int {
			if c := cmpInt(a.Fire, b.Fire); c != 0 {
				return c
			}
			if c := cmpInt(a.Hold, b.Hold); c != 0 {
				return c
			}
			if c := bytes.Compare(a.Key, b.Key); c != 0 {
				return c
			}
			return strings.Compare(a.Tag, b.Tag)
		})
		restoreNow.Store(d.now)
		d.req.Bundle(true)
		d.call("StartBundle", "")
		for _, tm := range due {
			delete(d.timers, [2]string{string(tm.Key), tm.Tag})
			vals := []reflect.Value{reflect.ValueOf(beam.EventTime(tm.Hold)), reflect.ValueOf(timers.Context{Family: d.family, Tag: tm.Tag})}
			if d.buckets > 0 {
				vals = append(vals, reflect.ValueOf(tm.Key)) // the bucket's key
			}
			d.call("OnTimer", string(tm.Key), vals...)
		}
		d.call("FinishBundle", "")
		d.req.Bundle(false)
	}
	d.t.Fatal("timers keep firing")
}

func cmpInt(a, b int64) int { return int(min(max(a-b, -1), 1)) }

// call calls the DoFn's method name, if it has it, filling each parameter
// by its type: the context, the window, the key's state and timers, the
// key, and vals (an element time, a row, a timer context); the two row
// emitters are the output and the dropped rows. A method the DoFn lacks
// (FinishBundle) is skipped; a parameter it cannot fill fails the test,
// naming it, so that a change of the DoFn's signatures shows here.
func (d *restoreDriver) call(name, key string, vals ...reflect.Value) {
	m := d.fn.MethodByName(name)
	if !m.IsValid() {
		return
	}
	emitters := []reflect.Value{reflect.ValueOf(rowEmit(d.emit("out"))), reflect.ValueOf(rowEmit(d.emit("drop")))}
	var args []reflect.Value
	for i := range m.Type().NumIn() {
		pt := m.Type().In(i)
		var arg reflect.Value
		switch {
		case pt == reflect.TypeFor[context.Context]():
			arg = reflect.ValueOf(d.ctx)
		case pt == reflect.TypeFor[beam.Window]():
			arg = reflect.ValueOf(window.GlobalWindow{})
		case pt == reflect.TypeFor[typex.PaneInfo]():
			arg = reflect.ValueOf(typex.NoFiringPane()) // a stateful step's input has not been triggered
		case pt == reflect.TypeFor[state.Provider]():
			arg = reflect.ValueOf(&restoreState{d: d, key: key})
		case pt == reflect.TypeFor[timers.Provider]():
			arg = reflect.ValueOf(&restoreTimers{d: d, key: key})
		case pt == reflect.TypeFor[beam.T]():
			arg = reflect.ValueOf([]byte(key))
		case pt == reflect.TypeFor[rowEmit]() && len(emitters) > 0:
			arg, emitters = emitters[0], emitters[1:]
		default:
			for j, v := range vals {
				if v.Type().AssignableTo(pt) {
					arg, vals = v, slices.Delete(vals, j, j+1)
					break
				}
			}
		}
		if !arg.IsValid() {
			d.t.Fatalf("the restore test cannot pass parameter %d (%v) of %T.%s: teach call", i, pt, d.fn.Interface(), name)
		}
		args = append(args, arg)
	}
	res := m.Call(args)
	if n := len(res); n > 0 {
		if err, _ := res[n-1].Interface().(error); err != nil {
			d.t.Fatalf("%s: %v", name, err)
		}
	}
}

// emit records an output row: which output, its element time, its kind,
// key and value.
func (d *restoreDriver) emit(output string) func(beam.EventTime, beam.T, beam.V) {
	return func(ts beam.EventTime, _ beam.T, v beam.V) {
		r := v.(restoreRow)
		kind := ""
		if r.Op != "" && output == "out" {
			kind = r.Op + " "
		}
		d.out = append(d.out, fmt.Sprintf("%s %s %s%s/%s", output, ts.ToTime().UTC().Format("15:04:05.000"), kind, r.ID, r.V))
	}
}

// restoreState is the state.Provider of one key: the DoFn's one bag cell,
// kept as its coder's bytes, as a runner keeps it.
type restoreState struct {
	d   *restoreDriver
	key string
}

var errNotTheCell = errors.New("restore test: the DoFn used state other than its one bag")

func (s *restoreState) ReadBagState(id string) (out []any, _ []state.Transaction, err error) {
	if id != s.d.cellID {
		return nil, nil, errNotTheCell
	}
	s.d.req.Do(s.key, "get", func() {
		for _, b := range s.d.cells[s.key] {
			var v any
			if v, err = s.d.dec.Decode(bytes.NewReader(b)); err != nil {
				return
			}
			out = append(out, v)
		}
	})
	return out, nil, err
}

func (s *restoreState) WriteBagState(tx state.Transaction) (err error) {
	if tx.Key != s.d.cellID {
		return errNotTheCell
	}
	s.d.req.Do(s.key, "append", func() {
		var buf bytes.Buffer
		if err = s.d.enc.Encode(tx.Val, &buf); err == nil {
			s.d.cells[s.key] = append(s.d.cells[s.key], buf.Bytes())
		}
	})
	return err
}

func (s *restoreState) ClearBagState(tx state.Transaction) error {
	if tx.Key != s.d.cellID {
		return errNotTheCell
	}
	s.d.req.Do(s.key, "clear", func() { delete(s.d.cells, s.key) })
	return nil
}

func (s *restoreState) ReadValueState(string) (any, []state.Transaction, error) {
	return nil, nil, errNotTheCell
}
func (s *restoreState) WriteValueState(state.Transaction) error       { return errNotTheCell }
func (s *restoreState) ClearValueState(state.Transaction) error       { return errNotTheCell }
func (s *restoreState) CreateAccumulatorFn(string) reflectx.Func      { return nil }
func (s *restoreState) AddInputFn(string) reflectx.Func               { return nil }
func (s *restoreState) MergeAccumulatorsFn(string) reflectx.Func      { return nil }
func (s *restoreState) ExtractOutputFn(string) reflectx.Func          { return nil }
func (s *restoreState) WriteMapState(state.Transaction) error         { return errNotTheCell }
func (s *restoreState) ClearMapStateKey(state.Transaction) error      { return errNotTheCell }
func (s *restoreState) ClearMapState(state.Transaction) error         { return errNotTheCell }
func (s *restoreState) WriteOrderedListState(state.Transaction) error { return errNotTheCell }
func (s *restoreState) ClearOrderedListState(state.Transaction) error { return errNotTheCell }
func (s *restoreState) ReadOrderedListState(string) ([]any, []state.Transaction, error) {
	return nil, nil, errNotTheCell
}
func (s *restoreState) ReadMapStateValue(string, any) (any, []state.Transaction, error) {
	return nil, nil, errNotTheCell
}
func (s *restoreState) ReadMapStateKeys(string) ([]any, []state.Transaction, error) {
	return nil, nil, errNotTheCell
}

// restoreTimers is the timers.Provider of one key. A processing-time timer
// is kept at the runner's clock: its delay from the wall clock, which the
// DoFn sets it by (whole seconds in these cases), after the runner's now.
type restoreTimers struct {
	d   *restoreDriver
	key string
}

func (p *restoreTimers) Set(tm timers.TimerMap) {
	if tm.Family != p.d.family {
		p.d.t.Errorf("timer of family %q, want %q", tm.Family, p.d.family)
	}
	id := [2]string{p.key, tm.Tag}
	if tm.Clear {
		delete(p.d.timers, id)
		return
	}
	fire := int64(tm.FireTimestamp)
	if p.d.proc {
		fire = p.d.now + time.Until(tm.FireTimestamp.ToTime()).Round(time.Second).Milliseconds()
	}
	p.d.timers[id] = restoreTimer{Key: []byte(p.key), Tag: tm.Tag, Fire: fire, Hold: int64(tm.HoldTimestamp)}
}

package dedup_test

import (
	"context"
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
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/testing/deduptest"
	"github.com/beamdedup/beamdedup/transforms/deadletter"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/rowkind"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

type kindRow struct {
	Kind rowkind.Kind `beam:"kind"`
	Key  int64        `beam:"key"`
	Seq  int64        `beam:"seq"`
}

type badKeyRow struct {
	Tags  []string          `beam:"tags"`
	Attrs map[string]string `beam:"attrs"`
	Inner struct{ A int }   `beam:"inner"`
	Name  string            `beam:"name"`
	When  string            `beam:"when"`
}

func init() {
	beam.RegisterType(reflectType[kindRow]())
	register.Function1x1(formatTimedPlain)
	register.Function2x0(splitPair)
	register.Emitter2[string, int64]()
	register.Function2x0(floatPair)
	register.Emitter2[float64, string]()
	register.Function2x1(kvString)
	register.Function2x1(pairString)
	register.Function2x0(stampSeq)
	register.Emitter2[beam.EventTime, kindRow]()
	// Processing time = the row's event time: rows' timestamps double as
	// their arrival times, so arrival-time expiry is deterministic.
	deduptest.RegisterClock("rowtime", func(et time.Time) time.Time { return et })
}

func formatTimedPlain(e timedEvent) string { return e.UserID + "/" + e.Event }

func splitPair(s string, emit func(string, int64)) {
	k, v, _ := strings.Cut(s, "=")
	var n int64
	fmt.Sscan(v, &n)
	emit(k, n)
}

func floatPair(s string, emit func(float64, string)) {
	switch s {
	case "zero":
		emit(0, s)
	case "negzero":
		emit(math.Copysign(0, -1), s)
	case "nan1":
		emit(math.NaN(), s)
	case "nan2":
		emit(-math.NaN(), s)
	}
}

func kvString(k float64, v string) string { return fmt.Sprint(k) }

func stampSeq(r kindRow, emit func(beam.EventTime, kindRow)) { emit(beam.EventTime(r.Seq*1000), r) }

// Arrival-time expiry, checked when a row arrives (no timer involved: the
// input is bounded, so the stateful expansion sets no cleanup timer), with a clock that reads
// the row's timestamp. 4.1.3.3 and both outputs of 4.1.3.6.
func TestStateTTL_ExpiryCheckedOnArrivalWithInjectedClock(t *testing.T) {
	for _, tc := range []struct {
		name   string
		arrive []int // minutes after 10:00
		reset  bool
		want   []any
	}{
		{"4.1.3.3 refresh", []int{0, 3, 10}, true, []any{"Vas/login@10:00", "Vas/login@10:10"}},
		{"4.1.3.6 refresh", []int{0, 3, 7, 10}, true, []any{"Vas/login@10:00"}},
		{"4.1.3.6 no refresh", []int{0, 3, 7, 10}, false, []any{"Vas/login@10:00", "Vas/login@10:07"}},
		{"expiry is inclusive", []int{0, 5}, false, []any{"Vas/login@10:00", "Vas/login@10:05"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, s := beam.NewPipelineWithRoot()
			var rows []any
			for _, m := range tc.arrive {
				rows = append(rows, timedEvent{"Vas", "login", at(10, m)})
			}
			in := beam.ParDo(s, stampRowtime, beam.Create(s, rows...))
			out := dedup.KeepFirst(s, in, rowspec.PartitionBy("user_id"), dedup.StateTTL(5*time.Minute),
				dedup.ResetTTLOnDuplicate(tc.reset), deduptest.UseClock("rowtime"), dedup.AsStream()).Rows
			passert.Equals(s, beam.ParDo(s, formatTimed, out), tc.want...)
			c := run(t, p)
			assert.Equal(t, int64(len(tc.want)), c.Emitted)
			assert.Zero(t, c.TimerSets, "bounded input sets no timers")
		})
	}
}

// On a windowed PCollection state is per key and window: the first row per
// key per window is kept (the keep-first half of window deduplication).
func TestWindows_FirstRowPerKeyPerFixedWindow(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	in := streamOf(t, s,
		timedEvent{"u1", "a", at(10, 1)}, timedEvent{"u1", "b", at(10, 30)},
		timedEvent{"u1", "c", at(11, 5)}, timedEvent{"u1", "d", at(11, 10)},
		timedEvent{"u2", "e", at(10, 59)},
	)
	windowed := beam.WindowInto(s, window.NewFixedWindows(time.Hour), beam.ParDo(s, stampRowtime, in))
	out := dedup.KeepFirst(s, windowed, rowspec.PartitionBy("user_id"), dedup.StateTTL(time.Hour)).Rows
	global := beam.WindowInto(s, window.NewGlobalWindows(), out) // passert needs the global window
	passert.Equals(s, beam.ParDo(s, formatTimedPlain, global), "u1/a", "u1/c", "u2/e")
	c := run(t, p)
	assert.Equal(t, dedup.Counters{RowsIn: 5, Emitted: 3, DuplicatesDropped: 2}, deduptest.WithoutExpiry(deduptest.RowCounts(c)))
}

func TestKeepFirst_KVInput_FirstValuePerKey(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	kvs := beam.ParDo(s, splitPair, beam.Create(s, "a=1", "a=2", "b=3", "a=4"))
	out := dedup.KeepFirst(s, kvs).Rows
	passert.Equals(s, beam.DropValue(s, out), "a", "b")
	c := run(t, p)
	assert.Equal(t, dedup.Counters{RowsIn: 4, Emitted: 2, DuplicatesDropped: 2}, deduptest.RowCounts(c))
}

// On bounded input KeepFirst of KV<K,V> rows merges each key's values within the
// bundle (MiniBatch) and gives the same pairs and counts as without; the
// values of a key tie on time, so the encoding tie-break decides.
func TestKeepFirst_KVInput_BoundedSameWithAndWithoutInBundleMerge(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	var pairs []any
	for range 300 {
		pairs = append(pairs, fmt.Sprintf("k%d=%d", rng.IntN(25), rng.IntN(1000)))
	}
	counts := map[bool]dedup.Counters{}
	for _, on := range []bool{true, false} {
		p, s := beam.NewPipelineWithRoot()
		dedup.KeepFirst(s, beam.ParDo(s, splitPair, beam.Create(s, pairs...)), dedup.MiniBatch(on))
		counts[on] = deduptest.RowCounts(run(t, p))
	}
	assert.Equal(t, counts[false], counts[true])
	assert.Equal(t, dedup.Counters{RowsIn: 300, Emitted: 25, DuplicatesDropped: 275}, counts[true])

	p, s := beam.NewPipelineWithRoot()
	kvs := beam.ParDo(s, splitPair, beam.Create(s, pairs...))
	with := beam.ParDo(s, pairString, dedup.KeepFirst(s.Scope("with"), kvs, dedup.MiniBatch(true)).Rows)
	without := beam.ParDo(s, pairString, dedup.KeepFirst(s.Scope("without"), kvs, dedup.MiniBatch(false)).Rows)
	passert.Equals(s, with, without)
	passert.Count(s, with, "one pair per key", 25)
	run(t, p)
}

func pairString(k string, v int64) string { return fmt.Sprint(k, "=", v) }

// Float keys are canonicalized, on every expansion: the in-bundle merge and
// GroupByKey (default on bounded input), and the stateful one, which float
// keys get instead of the lifted combine (MiniBatch(false)), which cannot
// hash them (notes/beam-defects.md #7).
func TestKeepFirst_KVInput_FloatKeysNegativeZeroAndNaNsAreOneKeyEach(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []dedup.Option
	}{
		{"in-bundle merge", nil},
		{"no mini-batch", []dedup.Option{dedup.MiniBatch(false)}},
		{"stateful", []dedup.Option{dedup.AsStream()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, s := beam.NewPipelineWithRoot()
			kvs := beam.ParDo(s, floatPair, beam.Create(s, "zero", "negzero", "nan1", "nan2"))
			out := dedup.KeepFirst(s, kvs, tc.opts...).Rows
			passert.Equals(s, beam.ParDo(s, kvString, out), "0", "NaN")
			c := run(t, p)
			assert.Equal(t, dedup.Counters{RowsIn: 4, Emitted: 2, DuplicatesDropped: 2}, deduptest.RowCounts(c))
		})
	}
}

// Every input row lands in exactly one counter: a randomized changelog with
// a TTL, through the real transform.
func TestCounters_EveryRowLandsInExactlyOneCounter(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var rows []any
	for i := range 300 {
		rows = append(rows, kindRow{Kind: rowkind.Kind(rng.IntN(5)), Key: rng.Int64N(40), Seq: int64(i)})
	}
	p, s := beam.NewPipelineWithRoot()
	in := beam.ParDo(s, stampSeq, beam.Create(s, rows...))
	r1 := dedup.KeepFirst(s, in, rowspec.PartitionBy("key"), rowspec.KindColumn("kind"),
		dedup.StateTTL(20*time.Second), deduptest.UseClock("rowtime"), dedup.AsStream())
	out, dead := r1.Rows, r1.DeadLetters
	c := run(t, p)
	_ = out
	_ = dead
	require.Equal(t, int64(300), c.RowsIn)
	assert.Zero(t, c.Pending(), "%+v", c)
	assert.Positive(t, c.DeadLettered, "Kind(4) is invalid")
	assert.Positive(t, c.ChangelogSwallowed)
	assert.Positive(t, c.RetractionsIgnored)
	assert.Positive(t, c.KeysExpired)
	assert.LessOrEqual(t, c.StateReads, c.RowsIn-c.DeadLettered, "at most one state read per row")
}

func TestConstruction_ErrorsNameTheProblemAndTheFix(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []dedup.Option
		want string
	}{
		{"unknown column lists available ones", []dedup.Option{rowspec.PartitionBy("nope")}, `"nope"`},
		{"slice key column", []dedup.Option{rowspec.PartitionBy("tags")}, "cannot be a deterministic key"},
		{"map key column", []dedup.Option{rowspec.PartitionBy("attrs")}, "cannot be a deterministic key"},
		{"struct key column", []dedup.Option{rowspec.PartitionBy("inner")}, "cannot be a deterministic key"},
		{"PartitionByAll with a slice column", []dedup.Option{dedup.PartitionByAll()}, "cannot be a deterministic key"},
		{"OnTime of the wrong type", []dedup.Option{rowspec.OnTime("when")}, "must be time.Time or int64"},
		{"OnTime with Changelog", []dedup.Option{rowspec.OnTime("when"), rowspec.KindColumn("name")}, "cannot be combined with KindColumn"},
		{"negative StateTTL", []dedup.Option{dedup.StateTTL(-time.Second)}, "StateTTL(-1s): it must be >= 0"},
		{"negative EventTimeTTL", []dedup.Option{dedup.EventTimeTTL(-time.Second)}, "EventTimeTTL(-1s): it must be >= 0"},
		{"column named twice", []dedup.Option{rowspec.PartitionBy("name", "name")}, "twice"},
		{"empty PartitionBy", []dedup.Option{rowspec.PartitionBy()}, "at least one column"},
		{"Changelog column of the wrong type", []dedup.Option{rowspec.KindColumn("attrs")}, "must be a string"},
		{"unregistered clock", []dedup.Option{deduptest.UseClock("no-such-clock")}, "no clock registered"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, s := beam.NewPipelineWithRoot()
			in := beam.Create(s, badKeyRow{Name: "x"})
			_, err := dedup.TryKeepFirst(s, in, tc.opts...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Panics(t, func() { dedup.KeepFirst(s, in, tc.opts...) }, "KeepFirst panics with the same error")
		})
	}
	t.Run("unknown column error lists the available columns", func(t *testing.T) {
		_, s := beam.NewPipelineWithRoot()
		_, err := dedup.TryKeepFirst(s, beam.Create(s, badKeyRow{}), rowspec.PartitionBy("nope"))
		require.Error(t, err)
		for _, col := range []string{"tags", "attrs", "inner", "name", "when"} {
			assert.Contains(t, err.Error(), col)
		}
	})
	t.Run("PartitionBy with KV input", func(t *testing.T) {
		_, s := beam.NewPipelineWithRoot()
		kvs := beam.ParDo(s, splitPair, beam.Create(s, "a=1"))
		_, err := dedup.TryKeepFirst(s, kvs, rowspec.PartitionBy("a"))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "not allowed")
	})
	t.Run("KV input to window dedup", func(t *testing.T) {
		_, s := beam.NewPipelineWithRoot()
		kvs := beam.ParDo(s, splitPair, beam.Create(s, "a=1"))
		_, err := dedup.TryWindowFirst(s, beam.WindowInto(s, window.NewFixedWindows(time.Minute), kvs))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "takes struct rows")
	})
	t.Run("non-struct input", func(t *testing.T) {
		_, s := beam.NewPipelineWithRoot()
		_, err := dedup.TryKeepFirst(s, beam.Create(s, "a"))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "struct")
	})
}

// The UID names the scope of every step, so step names (and with them
// state) do not change when the pipeline around the transform changes.
func TestUID_NamesEveryStepOfTheTransform(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	in := beam.Create(s, userEvent{"Vas", "login", 1})
	dedup.KeepFirst(s.Scope("Elsewhere"), in, rowspec.PartitionBy("user_name"), dedup.UID("user-events-dedup"), dedup.AsStream())
	edges, _, err := p.Build()
	require.NoError(t, err)
	var names []string
	ours := 0
	for _, e := range edges {
		name := e.Scope().String() + "/" + e.Name()
		names = append(names, name)
		if strings.Contains(e.Name(), "dedup.") || strings.Contains(e.Name(), "dropKeyFn") {
			ours++
			assert.Contains(t, name, "root/Elsewhere/user-events-dedup/", "every step of KeepFirst is under its UID")
		}
	}
	require.GreaterOrEqual(t, ours, 3, "keying, stateful and DropKey steps found: %v", names)
	joined := strings.Join(names, "\n")
	assert.Contains(t, joined, "user-events-dedup/Key")
	assert.Contains(t, joined, "user-events-dedup/Dedup")
	assert.Contains(t, joined, "user-events-dedup/DropKey")
}

// A bounded input with a long StateTTL must not wait out the TTL: neither
// expansion sets a processing-time timer. (The deadline is a hang guard.)
func TestBoundedInput_LongStateTTLSetsNoTimerAndFinishes(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []dedup.Option
	}{
		{"combine expansion", nil},
		{"stateful expansion", []dedup.Option{dedup.AsStream()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, s := beam.NewPipelineWithRoot()
			in := beam.Create(s, userEvent{"Vas", "login", 1}, userEvent{"Vas", "login", 2})
			opts := append([]dedup.Option{rowspec.PartitionBy("user_name"), dedup.StateTTL(2 * time.Hour)}, tc.opts...)
			out := dedup.KeepFirst(s, in, opts...).Rows
			passert.Count(s, out, "kept", 1)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			pr, err := beam.Run(ctx, "prism", p)
			require.NoError(t, err)
			c := dedup.ReadCounters(pr)
			assert.Zero(t, c.TimerSets)
			assert.Equal(t, dedup.Counters{RowsIn: 2, Emitted: 1, DuplicatesDropped: 1}, deduptest.RowCounts(c))
		})
	}
}

type maybeTimed struct {
	ID   string     `beam:"id"`
	When *time.Time `beam:"when"`
}

func init() { beam.RegisterType(reflectType[maybeTimed]()) }

// A NULL event time cannot be ordered: the row is dead-lettered with the
// reason, never dropped silently, and the others are deduplicated.
func TestEventTime_NullEventTimeIsDeadLettered(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	t0 := at(10, 0)
	in := beam.Create(s, maybeTimed{"a", &t0}, maybeTimed{"a", &t0}, maybeTimed{"b", nil})
	r7 := dedup.KeepFirst(s, in, rowspec.PartitionBy("id"), rowspec.OnTime("when"), dedup.UID("timed"))
	out, dead := r7.Rows, r7.DeadLetters
	passert.Count(s, out, "kept", 1)
	passert.Equals(s, dead, deadletter.DeadLetter{Row: `{"id":"b","when":null}`, Reason: `OnTime column "when" is NULL`, Transform: "timed"})
	c := run(t, p)
	assert.Equal(t, dedup.Counters{RowsIn: 3, Emitted: 1, DuplicatesDropped: 1, DeadLettered: 1}, deduptest.RowCounts(c))
}

// Each panicking form panics with the construction error its Try form
// returns; on valid options the Result holds the rows and the dead letters,
// and the dropped rows only with OutputDropped.
func TestTry_ReturnsTheConstructionErrorTheTransformPanicsWith(t *testing.T) {
	type try func(beam.Scope, beam.PCollection, ...dedup.Option) (dedup.Result, error)
	type plain func(beam.Scope, beam.PCollection, ...dedup.Option) dedup.Result
	for _, tc := range []struct {
		name     string
		plain    plain
		try      try
		windowed bool
		valid    []dedup.Option
	}{
		{"KeepFirst", dedup.KeepFirst, dedup.TryKeepFirst, false, []dedup.Option{rowspec.PartitionBy("name")}},
		{"KeepLast", dedup.KeepLast, dedup.TryKeepLast, false, []dedup.Option{rowspec.PartitionBy("name"), rowspec.Upsert()}},
		{"WindowFirst", dedup.WindowFirst, dedup.TryWindowFirst, true, []dedup.Option{rowspec.PartitionBy("name")}},
		{"WindowLast", dedup.WindowLast, dedup.TryWindowLast, true, []dedup.Option{rowspec.PartitionBy("name")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, s := beam.NewPipelineWithRoot()
			in := beam.Create(s, badKeyRow{Name: "x"})
			if tc.windowed {
				in = beam.WindowInto(s, window.NewFixedWindows(time.Minute), in)
			}
			_, tryErr := tc.try(s, in, rowspec.PartitionBy("nope"))
			require.Error(t, tryErr)
			assert.PanicsWithError(t, tryErr.Error(), func() { tc.plain(s, in, rowspec.PartitionBy("nope")) })

			r, err := tc.try(s, in, tc.valid...)
			require.NoError(t, err)
			assert.True(t, r.Rows.IsValid(), "rows")
			assert.True(t, r.DeadLetters.IsValid(), "dead letters")
			assert.False(t, r.Dropped.IsValid(), "no dropped rows without OutputDropped")
			r, err = tc.try(s, in, append(tc.valid, dedup.OutputDropped())...)
			require.NoError(t, err)
			assert.True(t, r.Dropped.IsValid(), "dropped rows with OutputDropped")
		})
	}
}

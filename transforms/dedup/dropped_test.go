package dedup_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/teststream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/testing/prismtest"
	"github.com/beamdedup/beamdedup/transforms/deadletter"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// dropRow is a row whose N is unique in its input, so that every output
// row can be traced to the input row it is.
type dropRow struct {
	Key string `beam:"key"`
	N   int64  `beam:"n"`
	Op  string `beam:"op"`
	TS  int64  `beam:"ts"`  // event time, Unix ms
	Seq *int64 `beam:"seq"` // nil: NULL, a dead letter with SequenceBy
}

func init() {
	beam.RegisterType(reflectType[dropRow]())
	register.Function1x1(nOfRow)
	register.Function2x1(nOfKV)
	register.Function1x1(nOfDead)
	register.Function2x0(inputCaused)
	register.Function1x2(keyedDropRow)
	register.Function1x1(one)
	register.Emitter1[int64]()
}

func nOfRow(r dropRow) int64                   { return r.N }
func nOfKV(_ string, r dropRow) int64          { return r.N }
func keyedDropRow(r dropRow) (string, dropRow) { return r.Key, r }
func one(any) string                           { return "row" }

func nOfDead(d deadletter.DeadLetter) int64 {
	var r struct {
		N int64 `json:"n"`
	}
	if err := json.Unmarshal([]byte(d.Row), &r); err != nil {
		panic(err)
	}
	return r.N
}

// inputCaused passes on KeepLast's output rows that an input row caused:
// +I, +U and -D (a -U is the retraction of the row a +U replaces).
func inputCaused(r dropRow, emit func(int64)) {
	if r.Op != "-U" {
		emit(r.N)
	}
}

// randomDropRows are n rows of 12 keys with many exact and key duplicates,
// random kinds (with changelog), event times spread so that some arrive
// after the watermark passed them, and some NULL sequence values.
func randomDropRows(seed uint64, n int, changelog bool) []dropRow {
	rng := rand.New(rand.NewPCG(seed, 7))
	rows := make([]dropRow, n)
	for i := range rows {
		op := ""
		if changelog {
			op = []string{"+I", "+U", "-U", "-D", ""}[rng.IntN(5)]
		}
		var seq *int64
		if rng.IntN(10) > 0 {
			seq = ptr(rng.Int64N(4))
		}
		rows[i] = dropRow{Key: fmt.Sprint(rng.IntN(12)), N: int64(i), Op: op, TS: 1000 * (int64(i/25) + rng.Int64N(6)), Seq: seq}
	}
	return rows
}

// dropStream adds rows in batches of 25, advancing the watermark after
// each, so that later batches hold rows behind it.
func dropStream(t *testing.T, s beam.Scope, rows []dropRow) beam.PCollection {
	t.Helper()
	ts := teststream.NewConfig()
	for i := 0; i < len(rows); i += 25 {
		batch := make([]any, 0, 25)
		for _, r := range rows[i:min(i+25, len(rows))] {
			batch = append(batch, r)
		}
		require.NoError(t, ts.AddElements(int64(i/25)*1000, batch...))
		require.NoError(t, ts.AdvanceWatermark(int64(i/25+1)*1000))
	}
	require.NoError(t, ts.AdvanceWatermarkToInfinity())
	return teststream.Create(s, ts)
}

// Every input row ends in exactly one of Rows (KeepFirst and window dedup:
// as itself; KeepLast: as the +I, +U or -D it caused), DeadLetters and
// Dropped, in every expansion, on random input, and the counters account
// for every row.
func TestOutputDropped_EveryInputRowEndsInRowsDeadLettersOrDropped(t *testing.T) {
	type mode struct {
		name      string
		last      bool
		window    bool
		stream    bool
		kv        bool
		changelog bool
		opts      []dedup.Option
	}
	modes := []mode{
		{name: "KeepFirst stream, pre-filter", stream: true},
		{name: "KeepFirst stream, no mini-batch", stream: true, opts: []dedup.Option{dedup.MiniBatch(false)}},
		{name: "KeepFirst stream, event time", stream: true, opts: []dedup.Option{rowspec.OnTime("ts")}},
		{name: "KeepFirst stream, changelog", stream: true, changelog: true, opts: []dedup.Option{rowspec.KindColumn("op")}},
		{name: "KeepFirst stream, KV input", stream: true, kv: true, opts: []dedup.Option{rowspec.OnTime("ts")}},
		{name: "KeepFirst file, in-bundle merge, changelog", changelog: true, opts: []dedup.Option{rowspec.KindColumn("op")}},
		{name: "KeepFirst file, grouped, SequenceBy", opts: []dedup.Option{dedup.MiniBatch(false), rowspec.SequenceBy("seq")}},
		{name: "KeepFirst file, KV input", kv: true, opts: []dedup.Option{rowspec.KindColumn("op")}, changelog: true},
		{name: "KeepFirst file, forced stateful", opts: []dedup.Option{dedup.AsStream(), rowspec.OnTime("ts")}},
		{name: "KeepLast stream, fold", last: true, stream: true, changelog: true, opts: []dedup.Option{rowspec.KindColumn("op")}},
		{name: "KeepLast stream, ordered", last: true, stream: true, changelog: true, opts: []dedup.Option{rowspec.KindColumn("op"), rowspec.OnTime("ts"), dedup.MiniBatch(false)}},
		{name: "KeepLast stream, SequenceBy, fold", last: true, stream: true, opts: []dedup.Option{rowspec.KindColumn("op"), rowspec.SequenceBy("seq")}},
		{name: "KeepLast file", last: true, changelog: true, opts: []dedup.Option{rowspec.KindColumn("op"), rowspec.OnTime("ts")}},
		{name: "KeepLast file, KV input, grouped", last: true, kv: true, changelog: true, opts: []dedup.Option{rowspec.KindColumn("op"), dedup.MiniBatch(false)}},
		{name: "WindowFirst", window: true, opts: []dedup.Option{rowspec.OnTime("ts")}},
		{name: "WindowLast, SequenceBy", window: true, last: true, opts: []dedup.Option{rowspec.SequenceBy("seq")}},
	}
	for i, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			rows := randomDropRows(uint64(i), 200, m.changelog)
			p, s := beam.NewPipelineWithRoot()
			var in beam.PCollection
			if m.stream {
				in = dropStream(t, s, rows)
			} else {
				in = beam.CreateList(s, rows)
			}
			if m.window {
				in = beam.WindowInto(s, window.NewFixedWindows(3*time.Second), in)
			}
			if m.kv {
				in = beam.ParDo(s, keyedDropRow, in)
			}
			opts := append([]dedup.Option{dedup.OutputDropped(), dedup.UID("d")}, m.opts...)
			if !m.kv {
				opts = append(opts, rowspec.PartitionBy("key"))
			}
			var r dedup.Result
			switch {
			case m.window && m.last:
				r = dedup.WindowLast(s, in, opts...)
			case m.window:
				r = dedup.WindowFirst(s, in, opts...)
			case m.last:
				r = dedup.KeepLast(s, in, opts...)
			default:
				r = dedup.KeepFirst(s, in, opts...)
			}
			nOf := func(c beam.PCollection) beam.PCollection {
				if m.kv {
					return beam.ParDo(s, nOfKV, c)
				}
				return beam.ParDo(s, nOfRow, c)
			}
			kept := r.Rows
			if m.kv {
				kept = beam.DropKey(s, kept)
			}
			dead := beam.ParDo(s, nOfDead, r.DeadLetters)
			if m.last {
				// Counted, not traced: a -D carries the row it deletes.
				caused := beam.ParDo(s, inputCaused, kept)
				all := beam.Flatten(s, global(s, caused), global(s, dead), global(s, nOf(r.Dropped)))
				passert.Count(s, all, "input rows", len(rows))
			} else {
				want := make([]any, len(rows))
				for i, r := range rows {
					want[i] = r.N
				}
				all := beam.Flatten(s, global(s, beam.ParDo(s, nOfRow, kept)), global(s, dead), global(s, nOf(r.Dropped)))
				passert.Equals(s, all, want...)
			}
			pr := prismtest.Run(t, p, 2*time.Minute)
			if m.last && !m.window {
				c := dedup.ReadLastCounters(pr)
				assert.Equal(t, int64(len(rows)), c.RowsIn)
				assert.Positive(t, c.DuplicatesDropped+c.OutOfOrderDropped+c.RetractionsIgnored+c.Superseded, "the input has rows to drop")
				assert.Zero(t, c.Unaccounted(), "%+v", c)
				return
			}
			c := dedup.ReadCounters(pr)
			assert.Equal(t, int64(len(rows)), c.RowsIn)
			assert.Positive(t, c.DuplicatesDropped+c.LateDropped+c.CandidatesReplaced+c.ChangelogSwallowed+c.RetractionsIgnored, "the input has rows to drop")
			assert.Zero(t, c.Pending(), "%+v", c)
		})
	}
}

// Without OutputDropped the Result has no Dropped collection.
func TestOutputDropped_IsOptIn(t *testing.T) {
	_, s := beam.NewPipelineWithRoot()
	r := dedup.KeepFirst(s, beam.Create(s, dropRow{}), rowspec.PartitionBy("key"))
	assert.False(t, r.Dropped.IsValid())
}

// Two instances in one pipeline are told apart by UID; ReadCounters sums
// them, and KeepLast's counters are its own.
func TestCountersOf_ReadsOneInstanceByUID(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	rows := beam.CreateList(s, randomDropRows(1, 100, false))
	dedup.KeepFirst(s, rows, rowspec.PartitionBy("key"), dedup.UID("first-a"))
	dedup.KeepFirst(s, rows, rowspec.PartitionBy("key", "n"), dedup.UID("first-b"))
	dedup.KeepLast(s, rows, rowspec.PartitionBy("key"), rowspec.Upsert(), dedup.UID("last"))
	pr := prismtest.Run(t, p, 2*time.Minute)
	a, b := dedup.CountersOf(pr, "first-a"), dedup.CountersOf(pr, "first-b")
	assert.Equal(t, int64(12), a.Emitted, "one row per key")
	assert.Equal(t, int64(100), b.Emitted, "every row: n is unique")
	all := dedup.ReadCounters(pr)
	assert.Equal(t, a.RowsIn+b.RowsIn, all.RowsIn)
	assert.Equal(t, a.Emitted+b.Emitted, all.Emitted)
	last := dedup.LastCountersOf(pr, "last")
	assert.Equal(t, int64(100), last.RowsIn)
	assert.Equal(t, int64(12), last.Inserts)
	assert.Equal(t, last, dedup.ReadLastCounters(pr))
	assert.Zero(t, dedup.CountersOf(pr, "last").RowsIn, "KeepLast counts in its own namespace")
}

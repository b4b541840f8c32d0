package changelog_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/teststream"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/filter"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/testing/prismtest"
	"github.com/beamdedup/beamdedup/transforms/changelog"
	"github.com/beamdedup/beamdedup/transforms/deadletter"
	"github.com/beamdedup/beamdedup/transforms/rowkind"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

func TestMain(m *testing.M) { prismtest.Main(m) } // splitting off: notes/beam-defects.md 9

// change is an order's status change as KeepLast emits it.
type change struct {
	Op      string `beam:"op"`
	OrderID string `beam:"order_id"`
	Status  string `beam:"status"`
}

// kindChange has a rowkind.Kind column and a nullable group column.
type kindChange struct {
	Kind   rowkind.Kind `beam:"kind"`
	Region *string      `beam:"region"`
	Tier   int64        `beam:"tier"`
}

func init() {
	beam.RegisterType(reflect.TypeFor[change]())
	beam.RegisterType(reflect.TypeFor[kindChange]())
	register.Function1x1(formatCount)
	register.Function1x1(formatDead)
}

func formatCount(c changelog.GroupCount) string {
	return fmt.Sprintf("%s=%d@%d", c.Group, c.Count, c.Version)
}
func formatDead(d deadletter.DeadLetter) string { return d.Transform + ": " + d.Reason }

// The changelog KeepLast gives for three orders: o1 created → paid →
// shipped, o2 created → paid, o3 created then deleted.
var orderChanges = []change{
	{"+I", "o1", "created"}, {"-U", "o1", "created"}, {"+U", "o1", "paid"},
	{"-U", "o1", "paid"}, {"+U", "o1", "shipped"},
	{"+I", "o2", "created"}, {"-U", "o2", "created"}, {"+U", "o2", "paid"},
	{"+I", "o3", "created"}, {"-D", "o3", "created"},
}

func run(t *testing.T, p *beam.Pipeline) changelog.Counters {
	t.Helper()
	return changelog.ReadCounters(prismtest.Run(t, p, 2*time.Minute))
}

func TestCountPerKeyOnBoundedInputIsTheTotalPerGroup(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	rows := beam.CreateList(s, append(orderChanges, change{"?", "o4", "paid"}))
	r1 := changelog.CountPerKey(s, rows, rowspec.KindColumn("op"), changelog.GroupBy("status"), changelog.UID("status-counts"))
	counts, dead := r1.Counts, r1.DeadLetters
	passert.Equals(s, beam.ParDo(s, formatCount, counts), "created=0@6", "paid=1@3", "shipped=1@1")
	passert.Equals(s, beam.ParDo(s, formatDead, dead), `status-counts: KindColumn "op": unknown row kind "?": want one of +I, -U, +U, -D`)
	c := run(t, p)
	assert.Equal(t, changelog.Counters{RowsIn: 11, Added: 6, Subtracted: 4, DeadLettered: 1, CountsEmitted: 3}, c)
}

// Each change in its own watermark step, so Prism hands them over in order.
func streamOf[T any](t *testing.T, s beam.Scope, rows []T) beam.PCollection {
	t.Helper()
	ts := teststream.NewConfig()
	for i, r := range rows {
		require.NoError(t, ts.AdvanceWatermark(int64(i)))
		require.NoError(t, ts.AddElements(int64(i), r))
	}
	require.NoError(t, ts.AdvanceWatermarkToInfinity())
	return teststream.Create(s, ts)
}

func TestCountPerKeyOnAStreamEmitsEachGroupsNewCountAfterEveryChange(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	r2 := changelog.CountPerKey(s, streamOf(t, s, orderChanges), rowspec.KindColumn("op"), changelog.GroupBy("status"))
	counts, dead := r2.Counts, r2.DeadLetters
	passert.Equals(s, beam.ParDo(s, formatCount, counts),
		"created=1@1", "created=0@2", "paid=1@1", "paid=0@2", "shipped=1@1", // o1
		"created=1@3", "created=0@4", "paid=1@3", // o2
		"created=1@5", "created=0@6") // o3
	passert.Empty(s, dead)
	// The upsert stream's latest row per group is the bounded total.
	passert.Equals(s, beam.ParDo(s, formatCount, changelog.Latest(s, counts)), "created=0@6", "paid=1@3", "shipped=1@1")
	c := run(t, p)
	assert.Equal(t, changelog.Counters{RowsIn: 10, Added: 6, Subtracted: 4, CountsEmitted: 10}, c)
}

// A retraction can reach its group ahead of the insertion it retracts
// (after a shuffle; Flink in batch mode). The count is a sum: it goes
// below zero on the way, a count below zero is not emitted, and a group
// still below zero at the end of the input is one dead letter, as a
// negative total is on bounded input.
func TestCountPerKeyOnAStreamAppliesARetractionAheadOfItsInsertion(t *testing.T) {
	for _, tc := range []struct {
		name       string
		in         []change
		counts     []any
		dead       string // the reason of the one dead letter, if any
		c          changelog.Counters
		boundedAll []any // the bounded expansion's counts of the same rows
	}{
		{"it meets its insertion",
			[]change{{"-U", "o1", "created"}, {"+U", "o1", "paid"}, {"+I", "o2", "created"}, {"+I", "o1", "created"}},
			[]any{"paid=1@1", "created=0@2", "created=1@3"}, "",
			changelog.Counters{RowsIn: 4, Added: 3, Subtracted: 1, CountsEmitted: 3},
			[]any{"paid=1@1", "created=1@3"}},
		{"it never does",
			[]change{{"-U", "o1", "created"}, {"+I", "o1", "created"}, {"-D", "o1", "created"}, {"-D", "o1", "created"}},
			[]any{"created=0@2"},
			`group "created" ends below zero (-2): 2 more -U/-D rows than +I/+U rows`,
			changelog.Counters{RowsIn: 4, Added: 1, Subtracted: 3, CountsEmitted: 1, GroupsBelowZero: 1},
			nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, s := beam.NewPipelineWithRoot()
			r := changelog.CountPerKey(s, streamOf(t, s, tc.in), rowspec.KindColumn("op"), changelog.GroupBy("status"))
			passert.Equals(s, beam.ParDo(s, formatCount, r.Counts), tc.counts...)
			dead := func(uid string) []any {
				if tc.dead == "" {
					return nil
				}
				return []any{uid + ": " + tc.dead}
			}
			passert.Equals(s, beam.ParDo(s, formatDead, r.DeadLetters), dead("CountPerKey")...)
			// The bounded expansion of the same rows: the same counts at the end.
			bounded := changelog.CountPerKey(s, beam.CreateList(s, tc.in), rowspec.KindColumn("op"), changelog.GroupBy("status"), changelog.UID("bounded"))
			passert.Equals(s, beam.ParDo(s, formatCount, bounded.Counts), tc.boundedAll...)
			passert.Equals(s, beam.ParDo(s, formatDead, bounded.DeadLetters), dead("bounded")...)
			c := changelog.CountersOf(prismtest.Run(t, p, 2*time.Minute), "CountPerKey")
			assert.Equal(t, tc.c, c)
			assert.Equal(t, c.RowsIn, c.Added+c.Subtracted+c.DeadLettered, "every row counted once")
		})
	}
}

// In windows, a count is kept per group and window, and judged when its
// window ends: here the first window's ends below zero, the second's at 0.
func TestCountPerKeyOnAStreamJudgesEachWindowsCountAtItsEnd(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	ts := teststream.NewConfig()
	require.NoError(t, ts.AddElements(0, change{"-D", "o1", "created"}, change{"-D", "o2", "created"}))
	require.NoError(t, ts.AdvanceWatermark(10))
	require.NoError(t, ts.AddElements(10, change{"+I", "o3", "created"}))
	require.NoError(t, ts.AddElements(11, change{"-U", "o3", "created"}))
	require.NoError(t, ts.AdvanceWatermarkToInfinity())
	rows := beam.WindowInto(s, window.NewFixedWindows(10*time.Millisecond), teststream.Create(s, ts))
	r := changelog.CountPerKey(s, rows, rowspec.KindColumn("op"), changelog.GroupBy("status"))
	global := func(col beam.PCollection) beam.PCollection { return beam.WindowInto(s, window.NewGlobalWindows(), col) }
	passert.Equals(s, beam.ParDo(s, formatCount, global(r.Counts)), "created=1@1", "created=0@2")
	passert.Equals(s, beam.ParDo(s, formatDead, global(r.DeadLetters)), `CountPerKey: group "created" ends below zero (-2): 2 more -U/-D rows than +I/+U rows`)
	c := run(t, p)
	assert.Equal(t, changelog.Counters{RowsIn: 4, Added: 1, Subtracted: 3, CountsEmitted: 2, GroupsBelowZero: 1}, c)
}

// orders is the changelog of n orders that each go created → paid →
// shipped, with a deleted one every fifth, in KeepLast's order; finals are
// its counts per status.
func orders(n int) (rows []change, finals []any) {
	final := map[string]int{}
	for i := range n {
		id := fmt.Sprintf("o%03d", i)
		steps := []string{"created", "paid", "shipped"}[:1+i%3]
		rows = append(rows, change{"+I", id, steps[0]})
		for j := 1; j < len(steps); j++ {
			rows = append(rows, change{"-U", id, steps[j-1]}, change{"+U", id, steps[j]})
		}
		last := steps[len(steps)-1]
		if i%5 == 4 {
			rows = append(rows, change{"-D", id, last})
		} else {
			final[last]++
		}
	}
	for _, st := range []string{"created", "paid", "shipped"} {
		finals = append(finals, fmt.Sprintf("%s=%d", st, final[st]))
	}
	return rows, finals
}

func formatTotal(c changelog.GroupCount) string { return fmt.Sprintf("%s=%d", c.Group, c.Count) }
func negativeCount(c changelog.GroupCount) bool { return c.Count < 0 }

func init() {
	register.Function1x1(formatTotal)
	register.Function1x1(negativeCount)
}

// The same changelog in shuffled orders, one row at a time on a stream (so
// that Prism delivers it in that order): each group's latest count is the
// one of the changelog in order, no count emitted is below zero, and no
// row is dead-lettered.
func TestCountPerKeyOnAStreamEndsWithTheSameCountsInAnyOrder(t *testing.T) {
	rows, finals := orders(60)
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			shuffled := slices.Clone(rows)
			rand.New(rand.NewPCG(seed, 0)).Shuffle(len(shuffled), reflect.Swapper(shuffled))
			p, s := beam.NewPipelineWithRoot()
			r := changelog.CountPerKey(s, streamOf(t, s, shuffled), rowspec.KindColumn("op"), changelog.GroupBy("status"))
			passert.Equals(s, beam.ParDo(s, formatTotal, changelog.Latest(s, r.Counts)), finals...)
			passert.Empty(s, filter.Include(s, r.Counts, negativeCount))
			passert.Empty(s, r.DeadLetters)
			c := run(t, p)
			assert.Equal(t, int64(len(rows)), c.RowsIn)
			assert.Equal(t, c.RowsIn, c.Added+c.Subtracted, "every row applied")
			assert.Zero(t, c.GroupsBelowZero)
			assert.LessOrEqual(t, c.CountsEmitted, c.RowsIn)
		})
	}
}

func TestCountPerKeyOnBoundedInputDeadLettersAGroupEndingBelowZero(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	rows := beam.CreateList(s, []change{{"+I", "o1", "paid"}, {"-U", "o2", "created"}, {"-D", "o3", "created"}})
	r4 := changelog.CountPerKey(s, rows, rowspec.KindColumn("op"), changelog.GroupBy("status"))
	counts, dead := r4.Counts, r4.DeadLetters
	passert.Equals(s, beam.ParDo(s, formatCount, counts), "paid=1@1")
	passert.Equals(s, beam.ParDo(s, formatDead, dead), `CountPerKey: group "created" ends below zero (-2): 2 more -U/-D rows than +I/+U rows`)
	c := run(t, p)
	assert.Equal(t, changelog.Counters{RowsIn: 3, Added: 1, Subtracted: 2, CountsEmitted: 1, GroupsBelowZero: 1}, c)
}

// With the rows' key (Spec, as dedup.Result.Spec carries it), bounded
// input matches each key's retractions with its own rows: the -D of a key
// the input never inserted (bounded KeepLast's final -D of a key that ends
// deleted) retracts nothing here, where without the key it takes another
// key's row off its group.
func TestCountPerKeyOnBoundedInputWithTheKeyIgnoresARetractionOfARowItNeverAdded(t *testing.T) {
	rows := []change{
		{"+I", "o1", "paid"}, {"+I", "o2", "paid"}, // live
		{"-D", "o3", "paid"},                                                                         // deleted: a row from before the input
		{"+I", "o4", "created"}, {"-U", "o4", "created"}, {"+U", "o4", "paid"}, {"-D", "o4", "paid"}, // inserted and deleted in it
		{"-U", "o5", "created"}, {"+U", "o5", "shipped"}, // a history cut mid-way
	}
	for _, tc := range []struct {
		name string
		opts []changelog.Option
		want []any
		c    changelog.Counters
	}{
		{"with the key", []changelog.Option{rowspec.Spec{Key: []string{"order_id"}, Kind: "op"}},
			[]any{"paid=2@4", "created=0@2", "shipped=1@1"},
			changelog.Counters{RowsIn: 9, Added: 5, Subtracted: 2, RetractionsIgnored: 2, CountsEmitted: 3}},
		{"without it", []changelog.Option{rowspec.KindColumn("op")},
			[]any{"paid=1@5", "shipped=1@1"},
			changelog.Counters{RowsIn: 9, Added: 5, Subtracted: 4, CountsEmitted: 2, GroupsBelowZero: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, s := beam.NewPipelineWithRoot()
			r := changelog.CountPerKey(s, beam.CreateList(s, rows), append(tc.opts, changelog.GroupBy("status"))...)
			passert.Equals(s, beam.ParDo(s, formatCount, r.Counts), tc.want...)
			c := run(t, p)
			assert.Equal(t, tc.c, c)
			assert.Equal(t, c.RowsIn, c.Added+c.Subtracted+c.RetractionsIgnored+c.DeadLettered, "every row counted once")
		})
	}
}

// A group is the value of one column (NULL for a nil pointer), a JSON array
// of several, or "" without GroupBy; a Kind column works as a string one.
func TestCountPerKeyGroupsByOneSeveralOrNoColumns(t *testing.T) {
	eu, us := "eu", "us"
	in := []kindChange{
		{rowkind.Insert, &eu, 1}, {rowkind.Insert, &eu, 1}, {rowkind.UpdateBefore, &eu, 1},
		{rowkind.UpdateAfter, &us, 2}, {rowkind.Insert, nil, 1}, {rowkind.Delete, nil, 1},
		{rowkind.Insert, nil, 1},
	}
	p, s := beam.NewPipelineWithRoot()
	bounded := changelog.CountPerKey(s, beam.CreateList(s, in), rowspec.KindColumn("kind"), changelog.GroupBy("region", "tier")).Counts
	want := []any{`["eu",1]=1@3`, `["us",2]=1@1`, `[null,1]=1@3`}
	passert.Equals(s, beam.ParDo(s, formatCount, bounded), want...)
	single := changelog.CountPerKey(s.Scope("single"), beam.CreateList(s, in), rowspec.KindColumn("kind"), changelog.GroupBy("region")).Counts
	passert.Equals(s, beam.ParDo(s, formatCount, single), "eu=1@3", "us=1@1", "NULL=1@3")
	all := changelog.CountPerKey(s.Scope("all"), beam.CreateList(s, in), rowspec.KindColumn("kind")).Counts
	passert.Equals(s, beam.ParDo(s, formatCount, all), "=3@7")
	c := run(t, p)
	assert.Equal(t, int64(3*len(in)), c.RowsIn)
}

func TestTryCountPerKeyReportsConfigurationErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []changelog.Option
		want string
	}{
		{"no kind column", []changelog.Option{changelog.GroupBy("status")}, "KindColumn is required"},
		{"unknown kind column", []changelog.Option{rowspec.KindColumn("kind")}, `"kind"`},
		{"unknown group column", []changelog.Option{rowspec.KindColumn("op"), changelog.GroupBy("state")}, `"state"`},
		{"upserts, which retract nothing", []changelog.Option{rowspec.Spec{Kind: "op", Upsert: true}}, "retract nothing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, s := beam.NewPipelineWithRoot()
			_, err := changelog.TryCountPerKey(s, beam.CreateList(s, orderChanges), tc.opts...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestTryCountPerKeyRejectsAKindColumnThatIsNeitherStringNorKind(t *testing.T) {
	_, s := beam.NewPipelineWithRoot()
	_, err := changelog.TryCountPerKey(s, beam.CreateList(s, []kindChange{{}}), rowspec.KindColumn("tier"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `KindColumn("tier"): the column has type int64; it must be a string`)
}

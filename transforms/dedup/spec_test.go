package dedup_test

import (
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/teststream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/testing/deduptest"
	"github.com/beamdedup/beamdedup/transforms/deadletter"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// The spec's use cases of section 4.1.3 through KeepFirst on Prism.

type idName struct {
	ID   int64  `beam:"id"`
	Name string `beam:"name"`
}

type trade struct {
	TradeID  string  `beam:"trade_id"`
	Ticker   string  `beam:"ticker"`
	Quantity int64   `beam:"quantity"`
	Price    float64 `beam:"price"`
}

func init() {
	beam.RegisterType(reflectType[idName]())
	beam.RegisterType(reflectType[trade]())
}

// streamOf builds a TestStream that adds each row with its own timestamp
// and advances the watermark after each, so Prism hands the rows to the
// stateful step one at a time in arrival order.
func streamOf(t *testing.T, s beam.Scope, rows ...any) beam.PCollection {
	t.Helper()
	ts := teststream.NewConfig()
	for i, r := range rows {
		require.NoError(t, ts.AddElements(int64(i+1)*1000, r))
		require.NoError(t, ts.AdvanceWatermark(int64(i+1)*1000))
	}
	require.NoError(t, ts.AdvanceWatermarkToInfinity())
	return teststream.Create(s, ts)
}

func TestSpec_4_1_3_1_UnkeyedWatermarklessKeepsTheFirstRowObserved(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	in := streamOf(t, s, idName{1, "Vas"}, idName{1, "Bob"})
	out := dedup.KeepFirst(s, in).Rows
	passert.Equals(s, out, idName{1, "Vas"})
	c := run(t, p)
	assert.Equal(t, dedup.Counters{RowsIn: 2, Emitted: 1, DuplicatesDropped: 1}, deduptest.RowCounts(c))
}

func TestSpec_4_1_3_2_KeyedWatermarklessKeepsTheFirstRowPerKey(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	in := streamOf(t, s, userEvent{"Vas", "login", 1}, userEvent{"Vas", "click", 2}, userEvent{"Bob", "view", 3})
	out := dedup.KeepFirst(s, in, rowspec.PartitionBy("user_name")).Rows
	passert.Equals(s, out, userEvent{"Vas", "login", 1}, userEvent{"Bob", "view", 3})
	c := run(t, p)
	assert.Equal(t, dedup.Counters{RowsIn: 3, Emitted: 2, DuplicatesDropped: 1}, deduptest.RowCounts(c))
}

// 4.1.3.3: arrivals at 10:00, 10:03, 10:10 with a 5-minute TTL; the 10:03
// duplicate refreshes the expiry to 10:08, so 10:10 starts a new period.
func TestSpec_4_1_3_3_KeyedStateTTLReemitsAfterExpiry(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	ts := teststream.NewConfig()
	last := 0
	for i, minute := range []int{0, 3, 10} {
		ts.AdvanceProcessingTime(int64(time.Duration(minute-last) * time.Minute / time.Millisecond))
		last = minute
		require.NoError(t, ts.AddElements(int64(i+1)*1000, userEvent{"Vas", "login", int64(minute)}))
		require.NoError(t, ts.AdvanceWatermark(int64(i+1)*1000))
	}
	require.NoError(t, ts.AdvanceWatermarkToInfinity())
	in := teststream.Create(s, ts)
	out := dedup.KeepFirst(s, in, rowspec.PartitionBy("user_name"), dedup.StateTTL(5*time.Minute)).Rows
	passert.Equals(s, beam.ParDo(s, formatUser, out), "Vas/login#0", "Vas/login#10")
	c := run(t, p)
	assert.Equal(t, int64(2), c.Emitted)
	assert.Equal(t, int64(1), c.DuplicatesDropped)
	assert.GreaterOrEqual(t, c.KeysExpired, int64(1), "the 10:10 row starts a new period")
}

func TestSpec_4_1_3_4_WholeRowKeyDropsExactDuplicates(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  dedup.Option
	}{
		{"explicit column list", rowspec.PartitionBy("trade_id", "ticker", "quantity", "price")},
		{"PartitionByAll", dedup.PartitionByAll()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, s := beam.NewPipelineWithRoot()
			in := streamOf(t, s, trade{"t1", "AAPL", 1, 10}, trade{"t1", "AAPL", 1, 10}, trade{"t1", "AAPL", 2, 10})
			out := dedup.KeepFirst(s, in, tc.opt).Rows
			passert.Equals(s, out, trade{"t1", "AAPL", 1, 10}, trade{"t1", "AAPL", 2, 10})
			c := run(t, p)
			assert.Equal(t, dedup.Counters{RowsIn: 3, Emitted: 2, DuplicatesDropped: 1}, deduptest.RowCounts(c))
		})
	}
}

// 4.1.3.7: an early -D is ignored without marking the key; the first +I is
// emitted; the duplicate, -U, +U and -D after it are swallowed.
func TestSpec_4_1_3_7_UpdatingInputBecomesInsertOnly(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	in := streamOf(t, s,
		changeRow{"-D", "Vas", "logout"},
		changeRow{"+I", "Vas", "login"},
		changeRow{"+I", "Vas", "login"},
		changeRow{"-U", "Vas", "login"},
		changeRow{"+U", "Vas", "click"},
		changeRow{"-D", "Vas", "click"},
	)
	out := dedup.KeepFirst(s, in, rowspec.PartitionBy("user_name"), rowspec.KindColumn("op")).Rows
	passert.Equals(s, out, changeRow{"+I", "Vas", "login"})
	c := run(t, p)
	assert.Equal(t, dedup.Counters{RowsIn: 6, Emitted: 1, DuplicatesDropped: 2, ChangelogSwallowed: 2, RetractionsIgnored: 1}, deduptest.RowCounts(c))
}

func TestChangelog_FirstUpdateAfterIsEmittedAsInsert(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	in := streamOf(t, s, changeRow{"-U", "Vas", "login"}, changeRow{"+U", "Vas", "click"})
	out := dedup.KeepFirst(s, in, rowspec.PartitionBy("user_name"), rowspec.KindColumn("op")).Rows
	passert.Equals(s, out, changeRow{"+I", "Vas", "click"})
	run(t, p)
}

func TestChangelog_UnknownKindIsDeadLetteredWithReason(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	in := streamOf(t, s, changeRow{"+I", "Vas", "login"}, changeRow{"upsert", "Bob", "x"})
	r1 := dedup.KeepFirst(s, in, rowspec.PartitionBy("user_name"), rowspec.KindColumn("op"), dedup.UID("cdc"))
	out, dead := r1.Rows, r1.DeadLetters
	passert.Equals(s, out, changeRow{"+I", "Vas", "login"})
	passert.Equals(s, dead, deadletter.DeadLetter{
		Row:       `{"op":"upsert","user_name":"Bob","event":"x"}`,
		Reason:    `KindColumn "op": unknown row kind "upsert": want one of +I, -U, +U, -D`,
		Transform: "cdc",
	})
	c := run(t, p)
	assert.Equal(t, dedup.Counters{RowsIn: 2, Emitted: 1, DeadLettered: 1}, deduptest.RowCounts(c))
}

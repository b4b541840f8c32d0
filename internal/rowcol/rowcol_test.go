package rowcol

import (
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/coders/ordercoder"
	"github.com/beamdedup/beamdedup/internal/micros"
	"github.com/beamdedup/beamdedup/transforms/rowkind"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

type order struct {
	ID string `beam:"order_id"`
	Op string `beam:"op"`
	TS int64  `beam:"ts"`
}

func TestErrNamesEveryInconsistencyByItsOption(t *testing.T) {
	assert.NoError(t, Err(rowspec.Spec{Key: []string{"order_id"}, Kind: "op", OnTime: "ts"}))
	err := Err(rowspec.Spec{Key: []string{"a", "a", ""}, Kind: "a", OnTime: "ts", SequenceBy: "ts"})
	for _, want := range []string{`PartitionBy names column "a" twice`, `PartitionBy(["a" "a" ""]): a column name is empty`,
		`column "a" is both PartitionBy and KindColumn`, `column "ts" is both OnTime and SequenceBy`} {
		assert.ErrorContains(t, err, want)
	}
}

type timed struct {
	At   time.Time  `beam:"at"`
	Ms   int64      `beam:"ms"`
	Opt  *time.Time `beam:"opt"`
	Dur  time.Duration
	Name string `beam:"name"`
}

// One set of accepted types, a time read to the microsecond (an int64
// column's milliseconds), and every row without a time named by its
// column: NULL, the zero time.Time, a time outside Beam's range.
func TestTimeColumnReadsMicrosecondsAndNamesTheColumnOfARowWithout(t *testing.T) {
	rt := reflect.TypeFor[timed]()
	at := time.Date(2026, 3, 1, 9, 0, 0, 1_500_999, time.UTC) // 1 ms, 500 µs and 999 ns past the second
	c, err := NewTimeColumn(rt, "at")
	require.NoError(t, err)
	us, reason := c.Read(reflect.ValueOf(timed{At: at}))
	assert.Empty(t, reason)
	assert.Equal(t, at.UnixMilli()*1000+500, us, "nanoseconds within a microsecond are dropped")
	c, err = NewTimeColumn(rt, "ms")
	require.NoError(t, err)
	us, _ = c.Read(reflect.ValueOf(timed{Ms: 1234}))
	assert.Equal(t, int64(1_234_000), us)

	for _, tc := range []struct {
		col    string
		row    timed
		reason string
	}{
		{"opt", timed{}, `OnTime column "opt" is NULL`},
		{"at", timed{}, `OnTime column "at" holds the zero time.Time (no time was set)`},
		{"ms", timed{Ms: micros.MaxMillis}, `OnTime column "ms": event time 9223372036854775 ms is outside Beam's timestamp range`},
		{"at", timed{At: time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC)}, `OnTime column "at": event time 300000-01-01 00:00:00 +0000 UTC is outside Beam's timestamp range`},
		{"at", timed{At: time.Unix(math.MaxInt64/2, 0)}, "is outside Beam's timestamp range"},
	} {
		c, err := NewTimeColumn(rt, tc.col)
		require.NoError(t, err)
		_, reason := c.Read(reflect.ValueOf(tc.row))
		assert.Contains(t, reason, tc.reason)
	}
	for _, col := range []string{"Dur", "name"} {
		_, err := NewTimeColumn(rt, col)
		assert.ErrorContains(t, err, `OnTime("`+col+`"): the column has type`)
		assert.ErrorContains(t, err, "it must be time.Time or int64 Unix milliseconds")
	}
	_, err = NewTimeColumn(rt, "nope")
	assert.ErrorContains(t, err, `OnTime("nope"): unknown column "nope"`)
}

type stringKindRow struct {
	Op string `beam:"op"`
	ID string
}

type kindRow struct {
	Op rowkind.Kind `beam:"op"`
	ID string
}

func TestKindColumnReadsAndWritesAStringOrKindColumn(t *testing.T) {
	for _, tc := range []struct {
		name string
		row  any
		set  func(k rowkind.Kind) any // the row with kind k
	}{
		{"string", stringKindRow{Op: "-U", ID: "a"}, func(k rowkind.Kind) any { return stringKindRow{Op: k.String(), ID: "a"} }},
		{"Kind", kindRow{Op: rowkind.UpdateBefore, ID: "a"}, func(k rowkind.Kind) any { return kindRow{Op: k, ID: "a"} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := NewKindColumn(reflect.TypeOf(tc.row), "op")
			require.NoError(t, err)
			k, reason := c.Read(reflect.ValueOf(tc.row))
			require.Empty(t, reason)
			assert.Equal(t, rowkind.UpdateBefore, k)
			assert.Equal(t, tc.set(rowkind.Delete), c.With(tc.row, rowkind.Delete))
			assert.Equal(t, tc.set(rowkind.UpdateBefore), tc.row, "With copies the row")
		})
	}
	c, _ := NewKindColumn(reflect.TypeFor[stringKindRow](), "op")
	k, reason := c.Read(reflect.ValueOf(stringKindRow{}))
	assert.Equal(t, rowkind.Insert, k, "an empty kind is +I")
	assert.Empty(t, reason)
}

func TestKindColumnNamesTheColumnOfAnUnknownKindAndRejectsOtherTypes(t *testing.T) {
	c, err := NewKindColumn(reflect.TypeFor[stringKindRow](), "op")
	require.NoError(t, err)
	_, reason := c.Read(reflect.ValueOf(stringKindRow{Op: "x"}))
	assert.Equal(t, `KindColumn "op": unknown row kind "x": want one of +I, -U, +U, -D`, reason)

	kc, err := NewKindColumn(reflect.TypeFor[kindRow](), "op")
	require.NoError(t, err)
	_, reason = kc.Read(reflect.ValueOf(kindRow{Op: 7}))
	assert.Equal(t, `KindColumn "op": unknown row kind Kind(7): want one of +I, -U, +U, -D`, reason)

	_, err = NewKindColumn(reflect.TypeFor[struct{ Op int }](), "Op")
	assert.EqualError(t, err, `KindColumn("Op"): the column has type int; it must be a string ("+I", "-U", "+U", "-D") or a rowkind.Kind`)
	_, err = NewKindColumn(reflect.TypeFor[kindRow](), "missing")
	assert.ErrorContains(t, err, `KindColumn("missing"): unknown column`)
}

func TestSeqColumnReadsEachSupportedTypeAndRejectsOthers(t *testing.T) {
	type row struct {
		I   int32      `beam:"i"`
		U   uint16     `beam:"u"`
		F   float32    `beam:"f"`
		S   string     `beam:"s"`
		T   time.Time  `beam:"t"`
		P   *int64     `beam:"p"`
		Bad []byte     `beam:"bad"`
		PT  *time.Time `beam:"pt"`
	}
	rt := reflect.TypeFor[row]()
	v := reflect.ValueOf(row{I: -3, U: 7, F: -0.5, S: "ab", T: time.Unix(5, 6_789)})
	for col, want := range map[string][]byte{
		"i": ordercoder.Int(nil, -3), "u": ordercoder.Uint(nil, 7), "f": ordercoder.Float(nil, -0.5),
		"s": ordercoder.String(nil, "ab"), "t": ordercoder.Time(nil, time.Unix(5, 6_000)),
	} {
		c, err := NewSeqColumn(rt, col)
		require.NoError(t, err, col)
		got, reason := c.Append(nil, v)
		assert.Empty(t, reason, col)
		assert.Equal(t, want, got, col)
	}
	p, pt := int64(-9), time.Unix(5, 6_789)
	set := reflect.ValueOf(row{P: &p, PT: &pt})
	for col, want := range map[string][]byte{"p": ordercoder.Int(nil, -9), "pt": ordercoder.Time(nil, time.Unix(5, 6_000))} {
		c, err := NewSeqColumn(rt, col)
		require.NoError(t, err)
		got, reason := c.Append([]byte{1}, set)
		assert.Empty(t, reason, col)
		assert.Equal(t, append([]byte{1}, want...), got, "a pointer reads what it points to, appended to dst: %s", col)

		got, reason = c.Append([]byte{1}, v)
		assert.Equal(t, `SequenceBy column "`+col+`" is NULL`, reason)
		assert.Equal(t, []byte{1}, got, "dst unchanged")
	}
	_, err := NewSeqColumn(rt, "bad")
	assert.EqualError(t, err, `SequenceBy("bad"): the column has type []uint8; it must be a signed or unsigned integer, a float, a time.Time or a string (or a pointer to one)`)
	_, err = NewSeqColumn(rt, "nope")
	assert.ErrorContains(t, err, `SequenceBy("nope"): unknown column "nope"`)
}

type versioned struct {
	ID  string    `beam:"id"`
	Op  string    `beam:"op"`
	Ver *int64    `beam:"ver"`
	TS  time.Time `beam:"ts"`
}

func TestResolveReportsEveryProblemAtOnceAndReadReadsEveryRole(t *testing.T) {
	rt := reflect.TypeFor[versioned]()
	_, err := Resolve(rowspec.Spec{Key: []string{"id", "id"}, Kind: "ver", OnTime: "id", SequenceBy: "nope"}, rt)
	for _, want := range []string{`PartitionBy names column "id" twice`, `KindColumn("ver"): the column has type *int64`,
		`OnTime("id"): the column has type string`, `SequenceBy("nope"): unknown column`} {
		assert.ErrorContains(t, err, want)
	}

	c, err := Resolve(rowspec.Spec{Key: []string{"id"}, Kind: "op", OnTime: "ts", SequenceBy: "ver"}, rt)
	require.NoError(t, err)
	ver := int64(3)
	at := time.Date(2026, 3, 1, 9, 0, 0, 2_000, time.UTC)
	v, reason := c.Read(reflect.ValueOf(versioned{ID: "a", Op: "-D", Ver: &ver, TS: at}), nil)
	require.Empty(t, reason)
	assert.Equal(t, Values{Kind: rowkind.Delete, Order: Order{Seq: ordercoder.Int(nil, 3), Time: at.UnixMicro(), Retraction: true}, HasTime: true}, v)
	_, reason = c.Read(reflect.ValueOf(versioned{ID: "a", TS: at}), nil)
	assert.Equal(t, `SequenceBy column "ver" is NULL`, reason)

	none, err := Resolve(rowspec.Spec{Key: []string{"id"}}, rt)
	require.NoError(t, err)
	v, reason = none.Read(reflect.ValueOf(versioned{Op: "-D"}), nil)
	assert.Empty(t, reason)
	assert.Equal(t, Values{Kind: rowkind.Insert}, v, "no roles: an insert, unordered")
}

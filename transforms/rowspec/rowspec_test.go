package rowspec

import (
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

type order struct {
	ID string `beam:"order_id"`
	Op string `beam:"op"`
	TS int64  `beam:"ts"`
}

func TestErrNamesEveryInconsistencyByItsOption(t *testing.T) {
	assert.NoError(t, Spec{Key: []string{"order_id"}, Kind: "op", OnTime: "ts"}.Err())
	err := Spec{Key: []string{"a", "a", ""}, Kind: "a", OnTime: "ts", SequenceBy: "ts"}.Err()
	for _, want := range []string{`PartitionBy names column "a" twice`, `PartitionBy(["a" "a" ""]): a column name is empty`,
		`column "a" is both PartitionBy and KindColumn`, `column "ts" is both OnTime and SequenceBy`} {
		assert.ErrorContains(t, err, want)
	}
}

func TestCheckListsEveryMissingColumn(t *testing.T) {
	rt := reflect.TypeFor[order]()
	assert.NoError(t, Spec{Key: []string{"order_id"}, Kind: "op", OnTime: "ts"}.Check(rt))
	err := Spec{Key: []string{"id"}, Kind: "kind", OnTime: "ts"}.Check(rt)
	assert.ErrorContains(t, err, `PartitionBy("id"): unknown column "id"`)
	assert.ErrorContains(t, err, `KindColumn("kind"): unknown column "kind"`)
	assert.ErrorContains(t, err, "available columns: order_id, op, ts")
}

type timed struct {
	At   time.Time  `beam:"at"`
	Ms   int64      `beam:"ms"`
	Opt  *time.Time `beam:"opt"`
	Dur  time.Duration
	Name string `beam:"name"`
}

// One set of accepted types, and every row without a time named by its
// column: NULL and the zero time.Time.
func TestTimeColumnReadsTimeOrMillisAndNamesTheColumnOfARowWithout(t *testing.T) {
	rt := reflect.TypeFor[timed]()
	at := time.Date(2026, 3, 1, 9, 0, 0, 1500, time.UTC)
	row := reflect.ValueOf(timed{At: at, Ms: 1234})
	c, err := NewTimeColumn(rt, "at")
	assert.NoError(t, err)
	tm, ms, reason := c.Read(row)
	assert.Equal(t, at, tm)
	assert.Equal(t, at.UnixMilli(), ms)
	assert.Empty(t, reason)
	c, err = NewTimeColumn(rt, "ms")
	assert.NoError(t, err)
	_, ms, _ = c.Read(row)
	assert.Equal(t, int64(1234), ms)
	c, _ = NewTimeColumn(rt, "opt")
	_, _, reason = c.Read(row)
	assert.Equal(t, `OnTime column "opt" is NULL`, reason)
	c, _ = NewTimeColumn(rt, "at")
	_, _, reason = c.Read(reflect.ValueOf(timed{}))
	assert.Equal(t, `OnTime column "at" holds the zero time.Time (no time was set)`, reason)
	for _, col := range []string{"Dur", "name"} {
		_, err := NewTimeColumn(rt, col)
		assert.ErrorContains(t, err, "it must be time.Time or int64 Unix milliseconds")
	}
}

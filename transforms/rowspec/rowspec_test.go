package rowspec

import (
	"reflect"
	"testing"

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

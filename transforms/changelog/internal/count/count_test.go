package count

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/transforms/rowkind"
)

func TestSign_InsertsAndUpdatesAddRetractionsTakeAway(t *testing.T) {
	for k, want := range map[rowkind.Kind]int64{rowkind.Insert: 1, rowkind.UpdateAfter: 1, rowkind.UpdateBefore: -1, rowkind.Delete: -1} {
		assert.Equal(t, want, Sign(k), k.String())
	}
}

// A key's retractions retract its own rows; those beyond them retract rows
// the input never added and are ignored.
func TestMatch_RetractionsBeyondAKeysOwnRowsAreIgnored(t *testing.T) {
	for _, tc := range []struct {
		name                string
		sum, rows           int64
		adds, rets, ignored int64
	}{
		{"one insert", 1, 1, 1, 0, 0},
		{"an update: +I -U +U", 1, 3, 2, 1, 0},
		{"a delete of a row the input has", 0, 2, 1, 1, 0},
		{"a delete of a row it never added", -1, 1, 0, 0, 1},
		{"two retractions, one row", -1, 3, 1, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			adds, rets, ignored := Match(tc.sum, tc.rows)
			assert.Equal(t, [3]int64{tc.adds, tc.rets, tc.ignored}, [3]int64{adds, rets, ignored})
		})
	}
}

type change struct {
	Op     string  `beam:"op"`
	ID     string  `beam:"id"`
	Status *string `beam:"status"`
	Tier   int     `beam:"tier"`
}

func TestColumns_ReadTheKindTheGroupAndTheKey(t *testing.T) {
	paid := "paid"
	c, err := NewColumns(reflect.TypeFor[change](), "op", []string{"status"}, []string{"id"})
	require.NoError(t, err)
	ch, reason := c.Read(reflect.ValueOf(change{Op: "-U", ID: "o1", Status: &paid}))
	require.Empty(t, reason)
	assert.Equal(t, int64(-1), ch.Sign)
	assert.Equal(t, "paid", ch.Group)
	assert.NotEmpty(t, ch.Key, "with the key, summed per key and group first")

	several, err := NewColumns(reflect.TypeFor[change](), "op", []string{"status", "tier"}, nil)
	require.NoError(t, err)
	ch, _ = several.Read(reflect.ValueOf(change{Tier: 2}))
	assert.Equal(t, `[null,2]`, ch.Group, "several columns: a JSON array, a nil pointer null")
	assert.Nil(t, ch.Key)

	_, reason = c.Read(reflect.ValueOf(change{Op: "x"}))
	assert.Contains(t, reason, `unknown row kind "x"`)

	_, err = NewColumns(reflect.TypeFor[change](), "", nil, nil)
	assert.ErrorContains(t, err, "KindColumn is required")
	_, err = NewColumns(reflect.TypeFor[change](), "op", []string{"state"}, nil)
	assert.ErrorContains(t, err, `GroupBy(["state"])`)
}

package rowkind

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type stringKindRow struct {
	Op string `beam:"op"`
	ID string
}

type kindRow struct {
	Op Kind `beam:"op"`
	ID string
}

func TestColumnReadsAndWritesAStringOrKindColumn(t *testing.T) {
	for _, tc := range []struct {
		name string
		row  any
		set  func(k Kind) any // the row with kind k
	}{
		{"string", stringKindRow{Op: "-U", ID: "a"}, func(k Kind) any { return stringKindRow{Op: k.String(), ID: "a"} }},
		{"Kind", kindRow{Op: UpdateBefore, ID: "a"}, func(k Kind) any { return kindRow{Op: k, ID: "a"} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := NewColumn(reflect.TypeOf(tc.row), "op")
			require.NoError(t, err)
			k, err := c.Kind(reflect.ValueOf(tc.row))
			require.NoError(t, err)
			assert.Equal(t, UpdateBefore, k)
			assert.Equal(t, tc.set(Delete), c.With(tc.row, Delete))
			assert.Equal(t, tc.set(UpdateBefore), tc.row, "With copies the row")
		})
	}
}

func TestColumnRejectsUnknownKindsAndOtherColumnTypes(t *testing.T) {
	c, err := NewColumn(reflect.TypeFor[stringKindRow](), "op")
	require.NoError(t, err)
	_, err = c.Kind(reflect.ValueOf(stringKindRow{Op: "x"}))
	assert.ErrorContains(t, err, "+I, -U, +U, -D")

	kc, err := NewColumn(reflect.TypeFor[kindRow](), "op")
	require.NoError(t, err)
	_, err = kc.Kind(reflect.ValueOf(kindRow{Op: 7}))
	assert.ErrorContains(t, err, "+I, -U, +U, -D")

	_, err = NewColumn(reflect.TypeFor[struct{ Op int }](), "Op")
	assert.ErrorContains(t, err, "must be a string")
	_, err = NewColumn(reflect.TypeFor[kindRow](), "missing")
	assert.Error(t, err)
}

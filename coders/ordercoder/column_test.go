package ordercoder

import (
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestColumn_ReadsEachSupportedTypeAndRejectsOthers(t *testing.T) {
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
	v := reflect.ValueOf(row{I: -3, U: 7, F: -0.5, S: "ab", T: time.Unix(5, 6)})
	for col, want := range map[string][]byte{
		"i": Int(nil, -3), "u": Uint(nil, 7), "f": Float(nil, -0.5),
		"s": String(nil, "ab"), "t": Time(nil, time.Unix(5, 6)),
	} {
		c, err := NewColumn(rt, col)
		require.NoError(t, err, col)
		got, ok := c.Append(nil, v)
		assert.True(t, ok, col)
		assert.Equal(t, want, got, col)
	}
	for _, col := range []string{"p", "pt"} {
		c, err := NewColumn(rt, col)
		require.NoError(t, err)
		_, ok := c.Append(nil, v)
		assert.False(t, ok, "nil pointer %s is NULL", col)
	}
	_, err := NewColumn(rt, "bad")
	assert.ErrorContains(t, err, "must be a signed or unsigned integer")
	_, err = NewColumn(rt, "nope")
	assert.ErrorContains(t, err, "nope")
}

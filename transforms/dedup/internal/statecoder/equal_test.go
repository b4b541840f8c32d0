package statecoder

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Equal must see every field: a field it missed would make a changed state
// look unchanged and skip its write. Each field is set alone, by
// reflection, so a field added to State is covered without editing this.
func TestEqual_EveryFieldCounts(t *testing.T) {
	base := State{}
	require.True(t, base.Equal(&State{}))
	v := reflect.ValueOf(&State{}).Elem()
	for i := range v.NumField() {
		var other State
		f := reflect.ValueOf(&other).Elem().Field(i)
		switch f.Kind() {
		case reflect.Slice:
			f.Set(reflect.ValueOf([]byte{1}))
		case reflect.Int64:
			f.SetInt(1)
		case reflect.Uint8, reflect.Uint16:
			f.SetUint(1)
		default:
			require.Failf(t, "unhandled field kind", "%s: %s", v.Type().Field(i).Name, f.Kind())
		}
		assert.False(t, base.Equal(&other), v.Type().Field(i).Name)
		assert.True(t, other.Equal(&other), v.Type().Field(i).Name)
	}
}

func TestEqual_NilAndEmptyBytesAreEqualAsEncoded(t *testing.T) {
	a := State{Phase: Emitted, Cand: nil}
	b := State{Phase: Emitted, Cand: []byte{}}
	assert.True(t, a.Equal(&b))
	assert.Equal(t, Encode(&a), Encode(&b))
}

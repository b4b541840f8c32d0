package rowcol

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestOrder_SequenceThenTimeThenALiveRowBeforeARetraction(t *testing.T) {
	o := func(seq string, us int64, retraction bool) Order {
		var s []byte
		if seq != "" {
			s = []byte(seq)
		}
		return Order{Seq: s, Time: us, Retraction: retraction}
	}
	for _, tc := range []struct {
		name           string
		a, b           Order
		cmp            int
		later, earlier bool // does a, arriving, replace b?
	}{
		{"earlier time", o("", 1, false), o("", 2, false), -1, false, true},
		{"later time", o("", 2, false), o("", 1, false), 1, true, false},
		{"a microsecond apart", o("", 1001, false), o("", 1000, false), 1, true, false},
		{"tie: the later arrival where the last is kept, the earlier where the first", o("", 1, false), o("", 1, false), 0, true, false},
		{"retractions tie too", o("", 1, true), o("", 1, true), 0, true, false},
		{"a retraction after a live row of its value", o("", 1, true), o("", 1, false), 1, true, false},
		{"a live row before a retraction of its value, whichever arrives later", o("", 1, false), o("", 1, true), -1, false, true},
		{"the value before the kind", o("", 2, false), o("", 1, true), 1, true, false},
		{"sequence before time", o("b", 1, false), o("a", 9, false), 1, true, false},
		{"no value (a timestamp alone): a retraction before a live row", Order{Time: 1, Stamped: true, Retraction: true}, Order{Time: 1, Stamped: true}, -1, false, true},
		{"a timestamp after a SequenceBy value: a retraction after", Order{Seq: []byte("a"), Time: 1, Stamped: true, Retraction: true}, Order{Seq: []byte("a"), Time: 1, Stamped: true}, 1, true, false},
		{"no sequence ranks first", o("", 9, false), o("a", 1, false), -1, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.cmp, tc.a.Compare(tc.b))
			assert.Equal(t, -tc.cmp, tc.b.Compare(tc.a), "antisymmetric")
			assert.Equal(t, tc.later, Later(tc.a, tc.b), "Later")
			assert.Equal(t, tc.earlier, Earlier(tc.a, tc.b), "Earlier")
		})
	}
}

func TestCompareRows_EncodingsBreakATieAndEqualRowsCompareEqual(t *testing.T) {
	a := Order{Time: 5}
	assert.Equal(t, -1, CompareRows(a, []byte("a"), a, []byte("b")))
	assert.Equal(t, 1, CompareRows(a, []byte("b"), a, []byte("a")))
	assert.Equal(t, 0, CompareRows(a, []byte("a"), a, []byte("a")), "equal rows")
	assert.Equal(t, 1, CompareRows(Order{Time: 6}, []byte("a"), a, []byte("z")), "the order first")
}

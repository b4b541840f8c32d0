package unbounded

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCheckReportsEveryMistakeInOneLine(t *testing.T) {
	tests := []struct {
		name string
		set  func(*Record)
		more []error
		want string
	}{
		{"none", func(*Record) {}, []error{nil}, ""},
		{"an option of another transform", func(r *Record) { r.Set("Own"); r.Set("Other") }, nil,
			"t: Other does not apply to t (it takes Own, Second)"},
		{"a bad value, a nil option and an argument", func(r *Record) { r.Errorf("Own(%d): want > 0", -1); r.NilOption(1, 2) },
			[]error{errors.New("bad topic")}, "t: bad topic; Own(-1): want > 0; option 2 of 2 is nil"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r Record
			tt.set(&r)
			err := r.Check("t", []string{"Own", "Second"}, tt.more...)
			if tt.want == "" {
				assert.NoError(t, err)
				return
			}
			assert.EqualError(t, err, tt.want)
		})
	}
}

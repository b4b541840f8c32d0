package pubsubadmin

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCheckNameAcceptsAFullNameOfItsKindAndSaysWhatAnotherNames(t *testing.T) {
	tests := []struct {
		name, kind string
		want       string // "" accepted; else a part of the error
	}{
		{"projects/p/subscriptions/s", Subscriptions, ""},
		{"projects/p/topics/t", Topics, ""},
		{"projects/p/topics/t", Subscriptions, "not a full subscription name (that names a topic)"},
		{"projects/p/subscriptions/s", Topics, "not a full topic name (that names a subscription)"},
		{"s", Subscriptions, `"s" is not a full subscription name; want projects/PROJECT/subscriptions/NAME`},
		{"projects//topics/t", Topics, "not a full topic name"},
		{"projects/p/topics/t/x", Topics, "not a full topic name"},
	}
	for _, tt := range tests {
		t.Run(tt.name+" as "+tt.kind, func(t *testing.T) {
			err := CheckName(tt.name, tt.kind)
			if tt.want == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tt.want)
		})
	}
}

func TestSplitNameGivesTheProjectAndTheShortName(t *testing.T) {
	project, short, ok := SplitName("projects/p/subscriptions/s", Subscriptions)
	assert.True(t, ok)
	assert.Equal(t, "p", project)
	assert.Equal(t, "s", short)
}

package changelog

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// Latest's combine keeps a group's later count by the comparator: the
// higher Version, and at an equal one the same row whichever comes first,
// as a combine must.
func TestLaterCount_KeepsTheHigherVersionInEitherOrder(t *testing.T) {
	v3 := GroupCount{Group: "paid", Count: 1, Version: 3}
	v5 := GroupCount{Group: "paid", Count: 0, Version: 5}
	other := GroupCount{Group: "paid", Count: 2, Version: 5}
	for _, pair := range [][2]GroupCount{{v3, v5}, {v5, v3}} {
		assert.Equal(t, v5, laterCount(pair[0], pair[1]))
	}
	assert.Equal(t, laterCount(v5, other), laterCount(other, v5), "an equal Version: one winner in both orders")
	assert.Equal(t, v5, laterCount(v5, v5))
}

package changelog

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/beamdedup/beamdedup/transforms/rowkind"
)

func TestApplyAddsOnInsertsAndUpdateAftersAndSubtractsOnRetractions(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		k    rowkind.Kind
		want int64
		err  string
	}{
		{0, rowkind.Insert, 1, ""},
		{3, rowkind.UpdateAfter, 4, ""},
		{1, rowkind.UpdateBefore, 0, ""},
		{2, rowkind.Delete, 1, ""},
		{0, rowkind.UpdateBefore, 0, "-U would take the count below zero"},
		{0, rowkind.Delete, 0, "-D would take the count below zero"},
		{5, rowkind.Kind(9), 5, "unknown row kind"},
	} {
		t.Run(fmt.Sprintf("%d%v", tc.n, tc.k), func(t *testing.T) {
			got, err := apply(tc.n, tc.k)
			assert.Equal(t, tc.want, got)
			if tc.err == "" {
				assert.NoError(t, err)
			} else {
				assert.ErrorContains(t, err, tc.err)
			}
		})
	}
}

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

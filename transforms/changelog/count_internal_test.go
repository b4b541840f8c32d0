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

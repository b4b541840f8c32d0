package dedup

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCandidateCoder_RoundTrips(t *testing.T) {
	for _, c := range []candidate{
		{},
		{Retractions: 3},
		{Has: true, TS: -62135596800000, Row: []byte{1, 2, 3}, Rows: 7, Retractions: 2},
	} {
		got, err := decodeCandidate(encodeCandidate(c))
		require.NoError(t, err)
		assert.Equal(t, c, got)
	}
	_, err := decodeCandidate(nil)
	assert.Error(t, err)
}

// The merge is what makes the bounded result repeatable: earliest timestamp,
// ties to the smaller encoding, in any order of merging.
func TestMergeCandidates_KeepsEarliestThenSmallestAndIsOrderIndependent(t *testing.T) {
	a := candidate{Has: true, TS: 5, Row: []byte("b"), Rows: 1}
	b := candidate{Has: true, TS: 5, Row: []byte("a"), Rows: 1}
	c := candidate{Has: true, TS: 9, Row: []byte("0"), Rows: 1}
	r := candidate{Retractions: 1}
	want := candidate{Has: true, TS: 5, Row: []byte("a"), Rows: 3, Retractions: 1}
	assert.Equal(t, want, mergeCandidates(mergeCandidates(a, b), mergeCandidates(c, r)))
	assert.Equal(t, want, mergeCandidates(mergeCandidates(r, c), mergeCandidates(b, a)))
	assert.Equal(t, want, mergeCandidates(a, mergeCandidates(r, mergeCandidates(c, b))))
}

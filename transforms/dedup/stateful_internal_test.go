package dedup

import (
	"bytes"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A candidate tag round-trips time, versions held and row, is valid UTF-8
// whatever the row bytes (runners may hold tags as strings), and is ""
// (untagged) for a candidate too large to carry or at time 0 (a cleared
// timer's hold).
func TestCandidateTag_RoundTripsValidUTF8AndOnlySmallCandidates(t *testing.T) {
	for _, tc := range []struct {
		at   int64
		held int
		cand []byte
	}{
		{1, 1, nil},
		{-62135596800000, 8, []byte{0xff, 0xfe, 0, 1}},
		{1704067200000, 300, bytes.Repeat([]byte{0x80}, maxTagCandidate)},
	} {
		tag := candidateTag(tc.at, tc.held, tc.cand)
		require.NotEmpty(t, tag)
		assert.True(t, utf8.ValidString(tag))
		at, held, cand, err := parseCandidateTag(tag)
		require.NoError(t, err)
		assert.Equal(t, tc.at, at)
		assert.Equal(t, tc.held, held)
		assert.Equal(t, len(tc.cand), len(cand))
		assert.True(t, bytes.Equal(tc.cand, cand))
	}
	assert.Empty(t, candidateTag(1, 1, make([]byte, maxTagCandidate+1)))
	assert.Empty(t, candidateTag(0, 1, []byte{1}))
	for _, bad := range []string{"x", "c", "c!!", "cAAAA", "cAAAAAAAAAAA"} {
		_, _, _, err := parseCandidateTag(bad)
		assert.Error(t, err, bad)
	}
}

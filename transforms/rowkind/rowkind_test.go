package rowkind

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseAcceptsTheFourKindsAndRoundTrips(t *testing.T) {
	for _, s := range []string{"+I", "-U", "+U", "-D"} {
		k, err := Parse(s)
		require.NoError(t, err)
		assert.True(t, k.Valid())
		assert.Equal(t, s, k.String())
	}
}

func TestParseRejectsUnknownKindsWithTheAcceptedForms(t *testing.T) {
	for _, s := range []string{"", "I", "+i", "c", "+I "} {
		_, err := Parse(s)
		require.Error(t, err, s)
		assert.Contains(t, err.Error(), "+I, -U, +U, -D")
	}
}

func TestZeroKindIsInsertAndOutOfRangeIsInvalid(t *testing.T) {
	var k Kind
	assert.Equal(t, Insert, k)
	assert.False(t, Kind(4).Valid())
	assert.False(t, Kind(-1).Valid())
	assert.Equal(t, "Kind(4)", Kind(4).String())
}

func TestIsRetractionIsTrueForUpdateBeforeAndDeleteOnly(t *testing.T) {
	for k, want := range map[Kind]bool{Insert: false, UpdateBefore: true, UpdateAfter: false, Delete: true} {
		assert.Equal(t, want, k.IsRetraction(), k.String())
	}
}

package pgsink

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/beamdedup/beamdedup/transforms/internal/dofn"
)

// The sink's DoFn is called through its registered callers: no reflection
// per element.
func TestRegisteredDoFnsAreCalledWithoutReflection(t *testing.T) {
	assert.NoError(t, dofn.Verify(&writeFn{}))
}

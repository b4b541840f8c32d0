package changelog

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/beamdedup/beamdedup/transforms/internal/dofn"
)

// Every DoFn of the package is called through its registered callers: no
// reflection per element.
func TestRegisteredDoFnsAreCalledWithoutReflection(t *testing.T) {
	for _, fn := range []any{&keyChangeFn{}, &countFn{}, &matchFn{}, &finalCountFn{}} {
		assert.NoError(t, dofn.Verify(fn))
	}
}

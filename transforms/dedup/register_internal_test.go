package dedup

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/beamdedup/beamdedup/transforms/internal/dofn"
)

// Every DoFn of the package is called through its registered callers,
// each method by its arity's fast path: no reflection per element.
func TestRegisteredDoFnsAreCalledWithoutReflection(t *testing.T) {
	for _, fn := range []any{
		&keyRowsFn{}, &foldRowsFn{}, &keyPairsFn{}, &marksFn{}, &versionsFn{}, &marksEventFn{}, &versionsEventFn{},
		&marksProcFn{}, &versionsProcFn{}, &toCandidateFn{}, &fromCandidateFn{}, &mergeGroupFn{}, &bucketFn{}, &mergeBucketFn{}, &keyCandidatesFn{}, &windowKeyFn{},
	} {
		assert.NoError(t, dofn.Verify(fn))
	}
}

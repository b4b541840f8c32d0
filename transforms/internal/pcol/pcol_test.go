package pcol_test

import (
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/teststream"
	"github.com/stretchr/testify/assert"

	"github.com/beamdedup/beamdedup/transforms/internal/pcol"
)

func TestIsBoundedTellsCreateFromTestStream(t *testing.T) {
	_, s := beam.NewPipelineWithRoot()
	assert.True(t, pcol.IsBounded(beam.Create(s, 1, 2)), "beam.Create")

	cfg := teststream.NewConfig()
	cfg.AddElements(0, 1, 2)
	assert.False(t, pcol.IsBounded(teststream.Create(s, cfg)), "teststream.Create")
}

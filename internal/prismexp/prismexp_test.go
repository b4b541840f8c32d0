package prismexp_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/beamdedup/beamdedup/internal/prismexp"
)

func TestMayBePrism_PrismAndTheUniversalRunnerOnly(t *testing.T) {
	for _, r := range []string{"prism", "PrismRunner", "universal", "portable", "PortableRunner"} {
		assert.True(t, prismexp.MayBePrism(r), r)
	}
	for _, r := range []string{"flink", "spark", "dataflow", "dot", ""} {
		assert.False(t, prismexp.MayBePrism(r), r)
	}
}

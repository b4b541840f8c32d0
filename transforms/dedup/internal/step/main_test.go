package step

import (
	"testing"

	"github.com/beamdedup/beamdedup/testing/prismtest"
)

// TestMain runs the reliance test's pipeline on Prism, with its splitting
// off (notes/beam-defects.md 9).
func TestMain(m *testing.M) { prismtest.Main(m) }

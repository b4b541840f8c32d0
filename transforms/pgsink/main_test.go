package pgsink_test

import (
	"testing"

	"github.com/beamdedup/beamdedup/testing/prismtest"
)

// TestMain runs the package's pipelines on Prism without bundle splitting
// (notes/beam-defects.md 9).
func TestMain(m *testing.M) { prismtest.Main(m) }

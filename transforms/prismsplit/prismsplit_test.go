package prismsplit_test

import (
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"
	// A program that runs on Prism links the universal runner, and with it
	// the SDK harness's flags (--worker).
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/universal"
	"github.com/stretchr/testify/assert"

	"github.com/beamdedup/beamdedup/internal/prismexp"
	"github.com/beamdedup/beamdedup/transforms/prismsplit"
)

func TestDisable_AddsTheExperimentOnceAndKeepsOthersUntilRestored(t *testing.T) {
	for _, tc := range []struct{ name, given, want string }{
		{"none given", "", "prism_disable_sdf_split"},
		{"others given", "a, b", "a,b,prism_disable_sdf_split"},
		{"already given", "prism_disable_sdf_split,a", "prism_disable_sdf_split,a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func(old string) { *jobopts.Experiments = old }(*jobopts.Experiments)
			*jobopts.Experiments = tc.given
			restore := prismsplit.Disable()
			assert.Equal(t, tc.want, *jobopts.Experiments)
			assert.True(t, prismexp.Disabled())
			restore()
			assert.Equal(t, tc.given, *jobopts.Experiments)
		})
	}
}

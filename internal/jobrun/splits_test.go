package jobrun_test

import (
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"
	"github.com/stretchr/testify/assert"

	"github.com/beamdedup/beamdedup/internal/jobrun"
)

func TestDisableSplits_AddsTheExperimentOnceAndKeepsOthersUntilRestored(t *testing.T) {
	for _, tc := range []struct{ name, given, want string }{
		{"none given", "", "prism_disable_sdf_split"},
		{"others given", "a,b", "a,b,prism_disable_sdf_split"},
		{"already given", "prism_disable_sdf_split,a", "prism_disable_sdf_split,a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func(old string) { *jobopts.Experiments = old }(*jobopts.Experiments)
			*jobopts.Experiments = tc.given
			restore := jobrun.DisableSplits()
			assert.Equal(t, tc.want, *jobopts.Experiments)
			assert.True(t, jobrun.SplitsDisabled())
			restore()
			assert.Equal(t, tc.given, *jobopts.Experiments)
		})
	}
}

func TestAllowSplits_RemovesOnlyTheExperimentUntilRestored(t *testing.T) {
	defer func(old string) { *jobopts.Experiments = old }(*jobopts.Experiments)
	*jobopts.Experiments = "a,prism_disable_sdf_split,b"
	restore := jobrun.AllowSplits()
	assert.Equal(t, "a,b", *jobopts.Experiments)
	assert.False(t, jobrun.SplitsDisabled())
	restore()
	assert.Equal(t, "a,prism_disable_sdf_split,b", *jobopts.Experiments)
}

func TestMayBePrism_PrismAndTheUniversalRunnerOnly(t *testing.T) {
	for _, r := range []string{"prism", "PrismRunner", "universal", "portable", "PortableRunner"} {
		assert.True(t, jobrun.MayBePrism(r), r)
	}
	for _, r := range []string{"flink", "spark", "dataflow", "dot", ""} {
		assert.False(t, jobrun.MayBePrism(r), r)
	}
}

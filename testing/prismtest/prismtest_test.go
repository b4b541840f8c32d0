package prismtest_test

import (
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"
	"github.com/stretchr/testify/assert"

	"github.com/beamdedup/beamdedup/testing/prismtest"
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
			restore := prismtest.DisableSplits()
			assert.Equal(t, tc.want, *jobopts.Experiments)
			assert.True(t, prismtest.SplitsDisabled())
			restore()
			assert.Equal(t, tc.given, *jobopts.Experiments)
		})
	}
}

func TestAllowSplits_RemovesOnlyTheExperimentUntilRestored(t *testing.T) {
	defer func(old string) { *jobopts.Experiments = old }(*jobopts.Experiments)
	*jobopts.Experiments = "a,prism_disable_sdf_split,b"
	restore := prismtest.AllowSplits()
	assert.Equal(t, "a,b", *jobopts.Experiments)
	assert.False(t, prismtest.SplitsDisabled())
	restore()
	assert.Equal(t, "a,prism_disable_sdf_split,b", *jobopts.Experiments)
}

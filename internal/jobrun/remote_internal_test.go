package jobrun

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// Names as Beam's Flink job server (2.62.0) listed them for jobs this
// package submitted.
func TestJavaJobName_IsTheStartOfTheNameAJavaJobServerGivesTheJob(t *testing.T) {
	for _, tc := range []struct{ given, listed string }{
		{"go-job-1-1796120318974149792", "go0job0101796120318974149792-root-1201101839-79a93ceb"},
		{"beamdedup-179612019023688221201", "beamdedup0179612019023688221201-root-1201101630-9c2e043"},
	} {
		assert.Equal(t, tc.listed[:len(javaJobName(tc.given))], javaJobName(tc.given), tc.given)
	}
}

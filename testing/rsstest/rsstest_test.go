package rsstest_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/beamdedup/beamdedup/testing/rsstest"
)

func TestPeakMBGrowsWithWhatTheProcessTouches(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc: VmHWM is Linux only")
	}
	rsstest.ResetPeak()
	before := rsstest.PeakMB()
	assert.Positive(t, before)
	buf := make([]byte, 64<<20)
	for i := range buf {
		buf[i] = 1
	}
	assert.GreaterOrEqual(t, rsstest.PeakMB(), before+60, "64 MB touched")
	_ = buf[len(buf)-1]
}

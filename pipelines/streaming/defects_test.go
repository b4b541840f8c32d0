package streaming

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/beamdedup/beamdedup/pipelines/internal/watchdog"
)

// TestBeamDefect_TerminalStatefulStageStallsTheStream reproduces the Prism
// stall of notes/beam-defects.md ("A streaming job stalls"): the pipeline
// as it was before the workaround, KeepFirst fused with the publish (a
// stage with no output and no timers), at 10,000 orders. Prism's progress
// loop of every running bundle of that stage busy-waits, up to 8 bundles
// at once, and the state round trips of those bundles starve: the job
// stops making progress. The watchdog fails the run after 60 s without a
// committed counter moving; the test passes when that happens, i.e. when
// the defect is still there. Opt in: BEAMDEDUP_REPRO=1 (takes 1-3 min).
func TestBeamDefect_TerminalStatefulStageStallsTheStream(t *testing.T) {
	if os.Getenv("BEAMDEDUP_REPRO") == "" {
		t.Skip("reproduction of an upstream defect; set BEAMDEDUP_REPRO=1 to run (1-3 min)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := RunDemo(ctx, DemoConfig{Keys: 10000, Runner: testRunner(), Timeout: 290 * time.Second,
		StallLimit: 60 * time.Second, fusedSink: true})
	var stall *watchdog.Stall
	if assert.ErrorAs(t, err, &stall, "with KeepFirst fused with the sink the job stalls (it finished: %v)", res) {
		t.Log(err)
	}
}

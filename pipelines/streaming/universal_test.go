package streaming

import (
	"context"
	"flag"
	"testing"
	"time"

	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/universal"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/testing/jobservertest"
)

// setFlag sets a Beam flag for one test.
func setFlag(t *testing.T, name, value string) {
	t.Helper()
	old := flag.Lookup(name).Value.String()
	require.NoError(t, flag.Set(name, value))
	t.Cleanup(func() { _ = flag.Set(name, old) })
}

// The demo submitted with --runner=universal to a standalone Prism job
// server process: the Job API path a Flink job server serves. LOOPBACK keeps the DoFns
// in this process, next to the Pub/Sub fake.
func TestDemoThroughUniversalRunnerOnAJobServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a job server")
	}
	endpoint := jobservertest.Start(t) // a standalone Prism job server process
	setFlag(t, "endpoint", endpoint)
	setFlag(t, "environment_type", "LOOPBACK")
	ctx := context.Background()

	rctx, rcancel := context.WithTimeout(ctx, 90*time.Second)
	defer rcancel()
	res, err := RunDemo(rctx, DemoConfig{Keys: 500, Runner: "universal", Timeout: 80 * time.Second})
	require.NoError(t, err)
	t.Log("\n" + res.String())
	assert.True(t, res.OK(), "one output per key, all acked, undecodables dead-lettered")
	assert.Equal(t, res.Keys, res.Emitted)
	assert.Zero(t, res.Unacked)
}

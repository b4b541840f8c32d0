package streaming

import (
	"context"
	"flag"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/universal"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// setFlag sets a Beam flag for one test.
func setFlag(t *testing.T, name, value string) {
	t.Helper()
	old := flag.Lookup(name).Value.String()
	require.NoError(t, flag.Set(name, value))
	t.Cleanup(func() { _ = flag.Set(name, old) })
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// The demo submitted with --runner=universal to a Prism job server on its own
// port: the Job API path a Flink job server serves. LOOPBACK keeps the DoFns
// in this process, next to the Pub/Sub fake.
func TestDemoThroughUniversalRunnerOnAJobServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a job server")
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	port := freePort(t)
	_, err := prism.CreateJobServer(ctx, prism.Options{Port: port, IdleShutdownTimeout: -1, CancelFn: cancel})
	require.NoError(t, err)
	setFlag(t, "endpoint", fmt.Sprintf("localhost:%d", port))
	setFlag(t, "environment_type", "LOOPBACK")

	rctx, rcancel := context.WithTimeout(ctx, 90*time.Second)
	defer rcancel()
	res, err := RunDemo(rctx, DemoConfig{Keys: 500, Runner: "universal", Timeout: 80 * time.Second})
	require.NoError(t, err)
	t.Log("\n" + res.String())
	assert.True(t, res.OK(), "one output per key, all acked, undecodables dead-lettered")
	assert.Equal(t, res.Keys, res.Emitted)
	assert.Zero(t, res.Unacked)
}

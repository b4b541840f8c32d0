package main

import (
	"context"
	"testing"
	"time"

	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/universal"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/internal/pubsubdemo"
	"github.com/beamdedup/beamdedup/testing/jobservertest"
)

// The demo submitted with --runner=universal to a standalone Prism job
// server process: the Job API path a Flink job server serves. LOOPBACK
// keeps the DoFns in this process; the Pub/Sub fake runs in its own.
func TestDemoThroughUniversalRunnerOnAJobServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a job server")
	}
	endpoint := jobservertest.Start(t) // a standalone Prism job server process
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	job := demoJob(t)
	job.Runner, job.Endpoint, job.EnvironmentType = "universal", endpoint, "LOOPBACK"
	res, err := runDemo(ctx, job, demoConfig{Script: pubsubdemo.Script{Keys: 500}, Fake: []string{pstestBin(t)}})
	require.NoError(t, err)
	t.Log("\n" + res.String())
	assert.True(t, res.OK(), "one output per key, all acked, undecodables dead-lettered")
	assert.Equal(t, res.Keys, res.Emitted)
	assert.Zero(t, res.Unacked)
}

package main

import (
	"context"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/internal/jobrun"
	"github.com/beamdedup/beamdedup/internal/pubsubdemo"
	"github.com/beamdedup/beamdedup/testing/prismtest"
)

// demoJob is the job of a demo run on Prism in this process, as runjob
// runs it: Beam initialized, Prism's bundle splitting off
// (notes/beam-defects.md 9).
func demoJob(tb testing.TB) jobrun.Options {
	tb.Helper()
	beam.Init()
	tb.Cleanup(jobrun.DisableSplits())
	return prismtest.Job(tb)
}

func TestDemoEmitsOneMessagePerKeyAndAcksEveryMessage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	res, err := runDemo(ctx, demoJob(t), demoConfig{Script: pubsubdemo.Script{Keys: 3000}, Fake: []string{pstestBin(t)}})
	require.NoError(t, err)
	t.Log("\n" + res.String())

	assert.Equal(t, res.Keys, res.Emitted, "one output message per key")
	assert.Equal(t, res.Keys, res.OutputKeys, "every key on the output topic")
	assert.Zero(t, res.Unacked, "every input message acked")
	assert.Equal(t, res.Published, res.Acked)
	assert.Equal(t, 3, res.DeadLettered, "undecodable messages dead-lettered")
	assert.Equal(t, res.Undecodable, res.DeadLettered)
	assert.Positive(t, res.AcksLost)
	assert.GreaterOrEqual(t, res.Redelivered, res.AcksLost, "every lost ack led to a redelivery")

	// Counters add up: every decodable delivery entered KeepFirst and was
	// either emitted or dropped as a duplicate.
	c := res.Status.Dedup
	assert.Equal(t, int64(res.RowsDelivered), c.RowsIn)
	assert.Equal(t, int64(res.Keys), c.Emitted)
	assert.Equal(t, c.RowsIn, c.Emitted+c.DuplicatesDropped)
	assert.Greater(t, c.DuplicatesDropped, int64(res.Redelivered), "exact duplicates and retries dropped too")
	assert.True(t, res.OK())
}

func TestDemoWithStateTTLEndsAtTheIdleStop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	start := time.Now()
	res, err := runDemo(ctx, demoJob(t), demoConfig{Script: pubsubdemo.Script{Keys: 300}, StateTTL: 2 * time.Hour, Fake: []string{pstestBin(t)}})
	require.NoError(t, err)
	assert.True(t, res.OK(), res.String())
	assert.Less(t, time.Since(start), 45*time.Second, "a 2h TTL must not keep the job alive")
}

package main

import (
	"context"
	"flag"
	"testing"
	"time"

	"github.com/beamdedup/beamdedup/internal/jobrun"
	"github.com/beamdedup/beamdedup/internal/pubsubdemo"
	"github.com/beamdedup/beamdedup/testing/rsstest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The old stall point was 10,000 orders (notes/beam-defects.md, "A
// streaming job stalls"): this runs above it in every `go test ./...`, with
// a deadline and the watchdog, so a regression fails instead of hanging.
func TestDemoAboveTheOldStallPointEmitsOnePerOrderAndAcksEverything(t *testing.T) {
	if testing.Short() {
		t.Skip("12,000 orders on Prism")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	res, err := runDemo(ctx, withStallLimit(demoJob(t), 45*time.Second), demoConfig{Script: pubsubdemo.Script{Keys: 12000}, Fake: []string{pstestBin(t)}})
	require.NoError(t, err, "the job must finish (a *watchdog.Stall here is the Prism stall coming back)")
	t.Log("\n" + res.String())
	assertDemoHeld(t, res)
}

func assertDemoHeld(t testing.TB, res demoResult) {
	t.Helper()
	assert.Equal(t, res.Keys, res.Emitted, "one output message per order")
	assert.Equal(t, res.Keys, res.OutputKeys, "every order on the output topic")
	assert.Zero(t, res.Unacked, "every input message acked")
	assert.Equal(t, res.Undecodable, res.DeadLettered, "undecodable messages dead-lettered")
	c := res.Status.Dedup
	// The fake counts a delivery when it hands a message to a Pull; a Pull
	// the client gave up on loses its messages until their lease ends, so
	// on a slow machine some deliveries never reach the job.
	assert.LessOrEqual(t, c.RowsIn, int64(res.RowsDelivered), "no row KeepFirst saw was not delivered")
	assert.Equal(t, c.RowsIn, c.Emitted+c.DuplicatesDropped, "every row emitted or dropped as a duplicate")
	assert.Equal(t, int64(res.Keys), c.Emitted)
}

var soakOrders = flag.Int("soak_orders", 50000, "orders of BenchmarkSoak")

// BenchmarkSoak runs the streaming demo at 50,000 orders (-soak_orders):
// exact duplicates, publisher retries, lost acks (so redeliveries) and
// undecodable payloads, on Prism against the in-process fake:
//
//	go test ./pipelines/streaming/demo -run='^$' -bench=Soak -benchtime=1x -timeout=30m
//
// It fails when the job stalls (watchdog), when an input message stays
// unacked, or when the output is not exactly one message per order.
func BenchmarkSoak(b *testing.B) {
	var rate, p50, p99, secs, peak float64
	for range b.N {
		rsstest.ResetPeak()
		ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
		res, err := runDemo(ctx, demoJob(b), demoConfig{Script: pubsubdemo.Script{Keys: *soakOrders}, Fake: []string{pstestBin(b)}})
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		b.Log("\n" + res.String())
		// RowsIn ≤ deliveries: see assertDemoHeld.
		if !res.OK() || res.Status.Dedup.RowsIn != res.Status.Dedup.Emitted+res.Status.Dedup.DuplicatesDropped || res.Status.Dedup.RowsIn > int64(res.RowsDelivered) {
			b.Fatalf("checks failed: %+v", res)
		}
		rate += float64(res.Delivered) / res.Elapsed.Seconds()
		secs += res.Elapsed.Seconds()
		p50 += float64(res.LatencyP50.Milliseconds())
		p99 += float64(res.LatencyP99.Milliseconds())
		peak = max(peak, rsstest.PeakMB())
	}
	n := float64(b.N)
	b.ReportMetric(rate/n, "msgs/s")
	b.ReportMetric(secs/n, "s/run")
	b.ReportMetric(p50/n, "p50-ms")
	b.ReportMetric(p99/n, "p99-ms")
	b.ReportMetric(peak, "peak-RSS-MB")
	b.ReportMetric(1, "acks-ok")
	b.ReportMetric(1, "one-output-per-order")
}

func withStallLimit(o jobrun.Options, limit time.Duration) jobrun.Options {
	o.StallLimit = limit
	return o
}

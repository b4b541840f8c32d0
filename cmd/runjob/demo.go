package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/beamdedup/beamdedup/internal/jobrun"
	"github.com/beamdedup/beamdedup/internal/pubsubdemo"
	"github.com/beamdedup/beamdedup/pipelines/streaming"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/pubsubio"
)

// demoConfig is a run of the demo. Zero values take the defaults.
type demoConfig struct {
	pubsubdemo.Script
	// StateTTL is the key retention, as dedup.StateTTL: 0 (the default)
	// remembers keys for the whole run. The demo sets no cleanup timers
	// (dedup.CleanupTimers(false)): processing-time ones would keep
	// Prism's job alive for StateTTL after the idle stop, and expiry is
	// checked when a row arrives anyway.
	StateTTL time.Duration
	// Fake is the command of the Pub/Sub fake (default
	// pubsubdemo.FakeCommand).
	Fake []string
}

// demoResult is what a run of the demo did: what the fake saw, and the
// job's status.
type demoResult struct {
	pubsubdemo.Report
	Status  streaming.Status
	Elapsed time.Duration
}

// String is a short report.
func (r demoResult) String() string {
	return fmt.Sprintf("%s\ndedup: %d rows in, %d emitted, %d duplicates dropped (in %v)",
		r.Report, r.Status.Dedup.RowsIn, r.Status.Dedup.Emitted, r.Status.Dedup.DuplicatesDropped, r.Elapsed.Round(time.Millisecond))
}

// runDemo starts the fake playing cfg's script, runs the pipeline against
// it as a job (job: the runner and its job server) until its idle stop,
// and returns what happened. beam.Init must have been called. The SDK
// workers reach the fake at a loopback address: run them on this machine
// (LOOPBACK, or a worker pool here).
func runDemo(ctx context.Context, job jobrun.Options, cfg demoConfig) (demoResult, error) {
	if len(cfg.Fake) == 0 {
		cfg.Fake = pubsubdemo.FakeCommand
	}
	fake, err := pubsubdemo.StartFake(ctx, cfg.Fake, cfg.Script)
	if err != nil {
		return demoResult{}, err
	}
	defer fake.Close()
	src := streaming.PubSub{
		Subscription:    pubsubdemo.Name("subscriptions", pubsubdemo.Subscription),
		OutputTopic:     pubsubdemo.Name("topics", pubsubdemo.Output),
		DeadLetterTopic: pubsubdemo.Name("topics", pubsubdemo.DeadLetters),
		Endpoint:        fake.Addr,
		Read: []pubsubio.Option{
			pubsubio.AckDeadline(2 * time.Second), // lost acks come back within seconds
			pubsubio.MaxBundleDuration(500 * time.Millisecond),
		},
	}
	// Publisher retries arrive while the job runs.
	later := make(chan error, 1)
	go func() {
		select {
		case <-time.After(time.Second):
			later <- fake.PublishLater(ctx)
		case <-ctx.Done():
			later <- nil
		}
	}()
	start := time.Now()
	res, err := streaming.Run(ctx, job, src, streaming.RunConfig{
		Config:   streaming.Config{Dedup: []dedup.Option{dedup.StateTTL(cfg.StateTTL), dedup.CleanupTimers(false)}},
		IdleStop: 5 * time.Second, // past the 2s lease after which lost acks come back
	})
	if err != nil {
		return demoResult{}, fmt.Errorf("streaming demo: %w", err)
	}
	out := demoResult{Status: res.Status, Elapsed: time.Since(start)}
	if out.Report, err = fake.Report(ctx); err != nil {
		return out, fmt.Errorf("streaming demo: %w", err)
	}
	return out, errors.Join(<-later)
}

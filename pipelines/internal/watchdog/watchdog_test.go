package watchdog

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeClock drives Watch: each tick advances the clock by step, and a
// sample is taken per tick from the script.
type fakeClock struct {
	now   time.Time
	step  time.Duration
	ticks chan time.Time
}

func newFakeClock(step time.Duration) *fakeClock {
	return &fakeClock{now: time.Unix(0, 0), step: step, ticks: make(chan time.Time)}
}

func (c *fakeClock) ticker(time.Duration) (<-chan time.Time, func()) { return c.ticks, func() {} }
func (c *fakeClock) Now() time.Time                                  { return c.now }

// script returns a Sample function that plays samples in order and then
// repeats the last one, advancing the clock before each.
func (c *fakeClock) script(samples ...Sample) func(context.Context) (Sample, error) {
	i := 0
	return func(context.Context) (Sample, error) {
		c.now = c.now.Add(c.step)
		s := samples[min(i, len(samples)-1)]
		i++
		return s, nil
	}
}

// watch runs Watch with the fake clock, feeding at most maxTicks ticks, and
// returns its result and the number of ticks it consumed.
func watch(t *testing.T, c *fakeClock, cfg Config, maxTicks int) (error, int) {
	t.Helper()
	cfg.Ticker, cfg.Now = c.ticker, c.Now
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- Watch(ctx, cfg) }()
	deadline := time.After(10 * time.Second) // a broken Watch fails the test, never hangs it
	for n := 0; ; n++ {
		if n == maxTicks {
			cancel()
			select {
			case err := <-done:
				return err, n
			case <-deadline:
				t.Fatal("Watch did not return after its context was cancelled")
			}
		}
		select {
		case err := <-done:
			return err, n
		case c.ticks <- c.now:
		case <-deadline:
			t.Fatal("Watch neither took a tick nor returned")
		}
	}
}

func counters(n int64) Sample {
	return Sample{Counters: map[string]int64{"pubsubio/messages_acked": n}, Pending: true}
}

func TestWatch_ReportsStallWhenNothingMovesForTheLimitWhileInputRemains(t *testing.T) {
	c := newFakeClock(time.Second)
	cfg := Config{Limit: 5 * time.Second, Sample: c.script(counters(1), counters(2), counters(3)), What: "streaming job", Hint: "see notes/beam-defects.md"}
	err, ticks := watch(t, c, cfg, 100)

	var stall *Stall
	require.ErrorAs(t, err, &stall)
	assert.Equal(t, 5*time.Second, stall.For)
	assert.Equal(t, 3+5, ticks, "3 moving samples, then 5 s without change")
	assert.Equal(t, "streaming job stalled: no progress for 5s while input remains (pubsubio/messages_acked=3); see notes/beam-defects.md", err.Error())
}

func TestWatch_DoesNotReportAJobThatKeepsMoving(t *testing.T) {
	c := newFakeClock(time.Second)
	var samples []Sample
	for i := range 50 {
		samples = append(samples, counters(int64(i)))
	}
	err, ticks := watch(t, c, Config{Limit: 5 * time.Second, Sample: c.script(samples...)}, 50)
	assert.NoError(t, err)
	assert.Equal(t, 50, ticks)
}

func TestWatch_DoesNotReportAnIdleJobWithNothingPending(t *testing.T) {
	c := newFakeClock(time.Second)
	idle := Sample{Counters: map[string]int64{"a": 7}, Pending: false}
	err, _ := watch(t, c, Config{Limit: 3 * time.Second, Sample: c.script(idle)}, 30)
	assert.NoError(t, err)
}

func TestWatch_FailingSamplesCountAsNoProgress(t *testing.T) {
	c := newFakeClock(time.Second)
	boom := errors.New("job server gone")
	sample := func(context.Context) (Sample, error) {
		c.now = c.now.Add(c.step)
		return Sample{}, boom
	}
	err, _ := watch(t, c, Config{Limit: 4 * time.Second, Sample: sample}, 100)
	var stall *Stall
	require.ErrorAs(t, err, &stall)
	assert.ErrorIs(t, stall.LastErr, boom)
	assert.Contains(t, err.Error(), "last sample failed: job server gone")
}

func TestWatch_RequiresLimitAndSample(t *testing.T) {
	assert.Error(t, Watch(context.Background(), Config{Sample: func(context.Context) (Sample, error) { return Sample{}, nil }}))
	assert.Error(t, Watch(context.Background(), Config{Limit: time.Second}))
}

func TestRun_CancelsTheJobAndReturnsTheStall(t *testing.T) {
	c := newFakeClock(time.Second)
	ticks := make(chan time.Time, 100)
	for range 100 {
		ticks <- time.Time{}
	}
	cfg := Config{Limit: 3 * time.Second, Sample: c.script(counters(1)), Now: c.Now,
		Ticker: func(time.Duration) (<-chan time.Time, func()) { return ticks, func() {} }}
	var jobErr error
	err := Run(context.Background(), cfg, func(ctx context.Context) error {
		select {
		case <-ctx.Done(): // a stalled job ends only when cancelled
			jobErr = context.Cause(ctx)
			return ctx.Err()
		case <-time.After(10 * time.Second):
			return errors.New("job was not cancelled")
		}
	})
	var stall *Stall
	require.ErrorAs(t, err, &stall)
	assert.ErrorAs(t, jobErr, &stall, "the job's context was cancelled with the stall as cause")
}

func TestRun_ReturnsTheJobsOwnResultWhenItEnds(t *testing.T) {
	boom := errors.New("boom")
	cfg := Config{Limit: time.Hour, Sample: func(context.Context) (Sample, error) { return counters(0), nil }}
	assert.NoError(t, Run(context.Background(), cfg, func(context.Context) error { return nil }))
	assert.ErrorIs(t, Run(context.Background(), cfg, func(context.Context) error { return boom }), boom)
}

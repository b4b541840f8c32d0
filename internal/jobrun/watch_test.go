package jobrun

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
		case c.ticks <- time.Time{}: // Watch reads the clock through Now, not the tick
		case <-deadline:
			t.Fatal("Watch neither took a tick nor returned")
		}
	}
}

func acked(n int64) Sample {
	return Sample{Counters: map[string]int64{"pubsubio/messages_acked": n}, Pending: true}
}

func TestWatch_ReportsStallWhenNothingMovesForTheLimitWhileInputRemains(t *testing.T) {
	c := newFakeClock(time.Second)
	cfg := Config{Limit: 5 * time.Second, Sample: c.script(acked(1), acked(2), acked(3)), What: "streaming job", Hint: "see notes/beam-defects.md"}
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
		samples = append(samples, acked(int64(i)))
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

func TestWatch_ReportsWhatDidNotHappenWhenTheSampleSaysSo(t *testing.T) {
	c := newFakeClock(time.Second)
	s := Sample{Counters: map[string]int64{"committed elements": 40}, Pending: true, Note: "no bundle finished"}
	err, _ := watch(t, c, Config{Limit: 3 * time.Second, Sample: c.script(s), What: "orders job on universal", Hint: "check the pool"}, 100)
	var stall *Stall
	require.ErrorAs(t, err, &stall)
	assert.Equal(t, "orders job on universal stalled: no bundle finished for 3s (committed elements=40); check the pool", err.Error())
}

func TestWatch_RequiresLimitAndSample(t *testing.T) {
	assert.Error(t, Watch(context.Background(), Config{Sample: func(context.Context) (Sample, error) { return Sample{}, nil }}))
	assert.Error(t, Watch(context.Background(), Config{Limit: time.Second}))
}

// live samples a job the way RunLive does: job-level Pending off, the
// source's reads in Counters, and the stages' own counts.
func live(read int64, stages ...Stage) Sample {
	return Sample{Counters: map[string]int64{"pubsubio/messages_read": read}, Stages: stages}
}

func TestWatch_ReportsAStageThatHoldsWorkAndFinishesNoneWhileTheSourceKeepsReading(t *testing.T) {
	c := newFakeClock(time.Second)
	var samples []Sample
	for i := range 20 {
		samples = append(samples, live(int64(100*i),
			Stage{Name: "source: messages pulled, not yet acked", Waiting: 0, Done: int64(100 * i)},
			Stage{Name: "KeepFirst: rows decoded, not yet deduplicated", Waiting: int64(100 * i), Done: 40}))
	}
	cfg := Config{Limit: 5 * time.Second, Sample: c.script(samples...), What: "streaming job", Hint: "see notes/beam-defects.md"}
	err, ticks := watch(t, c, cfg, 100)

	var stall *Stall
	require.ErrorAs(t, err, &stall)
	assert.Equal(t, "KeepFirst: rows decoded, not yet deduplicated", stall.Stage.Name)
	assert.Equal(t, 1+5, ticks, "the stage holds work from the second sample on; 5 s later it is reported")
	assert.Equal(t, "streaming job stalled: KeepFirst: rows decoded, not yet deduplicated: 500 waiting, none finished for 5s"+
		" (pubsubio/messages_read=500); see notes/beam-defects.md", err.Error())
}

func TestWatch_DoesNotReportStagesThatAreIdleOrKeepFinishingWork(t *testing.T) {
	steady := func(n int, f func(i int) Stage) []Sample {
		var s []Sample
		for i := range n {
			s = append(s, live(7, f(i)))
		}
		return s
	}
	tests := []struct {
		name    string
		samples []Sample
	}{
		{"nothing to read, ever", steady(1, func(int) Stage { return Stage{Name: "source", Done: 0} })},
		{"idle after a busy spell", steady(1, func(int) Stage { return Stage{Name: "KeepFirst", Waiting: 0, Done: 12000} })},
		{"work waiting, some finished every sample", steady(60, func(i int) Stage { return Stage{Name: "KeepFirst", Waiting: 500, Done: int64(i)} })},
		{"work waiting 4 s, then drained, then idle", append(
			steady(4, func(int) Stage { return Stage{Name: "publish", Waiting: 9, Done: 3} }),
			live(7, Stage{Name: "publish", Waiting: 0, Done: 3}))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newFakeClock(time.Second)
			err, ticks := watch(t, c, Config{Limit: 5 * time.Second, Sample: c.script(tt.samples...)}, 60)
			assert.NoError(t, err)
			assert.Equal(t, 60, ticks, "watched the whole minute")
		})
	}
}

func TestWatch_AStageStallsWhenItsSamplesFailWhileItHeldWork(t *testing.T) {
	c := newFakeClock(time.Second)
	boom := errors.New("job server gone")
	n := 0
	sample := func(context.Context) (Sample, error) {
		c.now = c.now.Add(c.step)
		if n++; n == 1 {
			return live(3, Stage{Name: "publish", Waiting: 2, Done: 1}), nil
		}
		return Sample{}, boom
	}
	err, _ := watch(t, c, Config{Limit: 4 * time.Second, Sample: sample}, 100)
	var stall *Stall
	require.ErrorAs(t, err, &stall)
	assert.Equal(t, "publish", stall.Stage.Name)
	assert.ErrorIs(t, stall.LastErr, boom)
}

// A live source's stage (Stage.Always) holds work whatever Waiting says:
// when nothing commits for the limit, even with nothing to read, it is
// the stage reported; while bundles commit, an idle job is not stalled.
func TestWatch_ReportsALiveSourceWhoseBundlesStopCommitting(t *testing.T) {
	liveAt := func(committed int64) Sample {
		return Sample{Counters: map[string]int64{"pubsubio/messages_read": 7},
			Stages: []Stage{{Name: "publish", Waiting: 0, Done: 7}, {Name: "Pub/Sub source", Always: true, Done: committed}}}
	}
	t.Run("bundles commit", func(t *testing.T) {
		c := newFakeClock(time.Second)
		var samples []Sample
		for i := range 60 {
			samples = append(samples, liveAt(int64(i)))
		}
		err, ticks := watch(t, c, Config{Limit: 5 * time.Second, Sample: c.script(samples...)}, 60)
		assert.NoError(t, err)
		assert.Equal(t, 60, ticks)
	})
	t.Run("nothing commits", func(t *testing.T) {
		c := newFakeClock(time.Second)
		err, ticks := watch(t, c, Config{Limit: 5 * time.Second, Sample: c.script(liveAt(1), liveAt(2), liveAt(2)), What: "streaming job"}, 100)
		var stall *Stall
		require.ErrorAs(t, err, &stall)
		assert.Equal(t, "Pub/Sub source", stall.Stage.Name)
		assert.Equal(t, 2+5, ticks)
		assert.Equal(t, "streaming job stalled: Pub/Sub source: no bundle committed for 5s, though a live source commits one every few seconds, with or without input (pubsubio/messages_read=7)", err.Error())
	})
}

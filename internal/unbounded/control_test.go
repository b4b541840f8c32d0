package unbounded

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAControlCountsWhatItsReadersDidAndStopsThem(t *testing.T) {
	ctl := NewControl()
	defer ctl.Close()
	var warned bool
	r := LookupControl(context.Background(), ctl.ID(), "topic t", &warned)
	require.Same(t, ctl, r, "found in this process")
	r.Claimed(3)
	r.Polling()
	assert.Positive(t, ctl.Progress().Polling, "a poll is out")
	r.Polled(true)
	r.Polling()
	r.Polled(false)
	assert.False(t, r.Requested())
	ctl.Stop()
	r.ReaderEnded()
	assert.Equal(t, Progress{Requested: true, Ended: 1, Claimed: 3, Answered: 1, Unanswered: true}, ctl.Progress())
	assert.False(t, warned)
}

func TestAControlElsewhereIsNilAndItsReaderMethodsDoNothing(t *testing.T) {
	var warned bool
	r := LookupControl(context.Background(), "control-in-another-process", "topic t", &warned)
	assert.Nil(t, r)
	assert.True(t, warned, "warned once")
	r.Claimed(1)
	r.ReaderEnded()
	r.Polling()
	r.Polled(true)
	r.OnClose(func(context.Context) error { return nil })
	assert.False(t, r.Requested())
	assert.Nil(t, LookupControl(context.Background(), "", "topic t", &warned), "no control")
}

func TestClosingAControlRunsWhatItsReadersLeftAndUnregistersIt(t *testing.T) {
	ctl := NewControl()
	var ran []string
	ctl.OnClose(func(context.Context) error { ran = append(ran, "kafka"); return errors.New("not committed") })
	ctl.OnClose(func(context.Context) error { ran = append(ran, "pubsub"); return nil })
	assert.EqualError(t, ctl.Close(), "not committed")
	assert.Equal(t, []string{"kafka", "pubsub"}, ran)
	var warned bool
	assert.Nil(t, LookupControl(context.Background(), ctl.ID(), "topic t", &warned), "unregistered")
	assert.NoError(t, ctl.Close(), "a second Close does nothing")
}

type testOption func(*testConfig)

type testConfig struct{ Config }

func TestControlOptionHandsOutTheOptionItsPackageRegistered(t *testing.T) {
	RegisterControlOption(func(ctl *Control) testOption { return func(c *testConfig) { c.SetControl(ctl) } })
	ctl := NewControl()
	defer ctl.Close()
	var c testConfig
	Apply(&c, &c.Record, []testOption{ControlOption[testOption](ctl), nil})
	assert.Equal(t, ctl.ID(), c.Reading().Control)
	assert.Equal(t, ctl.ID(), c.Reading().RunID, "the run is named by the control")
	assert.EqualError(t, c.Check("t", []string{ControlOptionName}), "t: option 2 of 2 is nil")
	assert.Panics(t, func() { ControlOption[func()](ctl) }, "no such option registered")
}

func TestTheSharedOptionsRecordTheirMistakes(t *testing.T) {
	var c Config
	c.SetMaxBundle(0)
	c.SetMaxElements("MaxBundleRecords", 0)
	c.SetIdleStop(-time.Second)
	c.SetWatermarkLag(-time.Second)
	c.SetControl(nil)
	err := c.Check("t", nil)
	for _, w := range []string{"MaxBundleDuration(0s): want a positive duration", "MaxBundleRecords(0): want a positive number",
		"IdleStop(-1s)", "WatermarkLag(-1s)", "a nil control", "MaxBundleDuration does not apply to t"} {
		assert.ErrorContains(t, err, w)
	}
	assert.NotEmpty(t, c.Reading().RunID, "a run of its own without a control")
}

func TestABundleSpendsItsBudgetAndMovesTheWatermark(t *testing.T) {
	ctl := NewControl()
	defer ctl.Close()
	r := Reading{MaxBundleMs: 60000, MaxElements: 3, WatermarkLagMs: 1000, IdleStopMs: 10, Control: ctl.ID()}
	we := NewWatermark(0)
	var warned bool
	b := r.Start(context.Background(), we, "topic t", &warned)
	assert.True(t, b.More())
	b.Claim(2)
	b.Spend(1)
	assert.False(t, b.More(), "three of three spent")
	assert.Equal(t, 2, b.Emitted())
	assert.Equal(t, int64(2), ctl.Progress().Claimed, "only what was emitted counts live")
	at := time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC)
	b.Advance(at)
	assert.True(t, at.Add(-time.Second).Equal(we.CurrentWatermark()), "the newest event time less the lag")
	assert.True(t, b.Idle(time.Now().Add(-time.Second)))
	assert.False(t, b.Idle(time.Now()))
	b.Ended()
	assert.Equal(t, 1, ctl.Progress().Ended)
}

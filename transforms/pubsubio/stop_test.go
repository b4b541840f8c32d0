package pubsubio

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/beamdedup/beamdedup/testing/pubsubtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A stop request ends a reader that would otherwise read forever (no
// IdleStop); everything it emitted is acked, nothing before its bundle
// committed, and what it never pulled stays on the subscription.
func TestStopperEndsReadersAfterAckingWhatTheyEmitted(t *testing.T) {
	srv := pubsubtest.New(t, 0)
	srv.MustTopic(t, "in")
	sub := srv.MustSubscription(t, "in", "in-sub", 30*time.Second)
	publishN(srv, "in", 200)

	name := t.Name()
	c := newCollection(name)
	st := NewStopper()
	defer st.Close()
	const readers = 2
	p, s := beam.NewPipelineWithRoot()
	msgs := Read(s, sub, Endpoint(srv.Addr), StopWith(st), Readers(readers),
		MaxBundleMessages(50), MaxBundleDuration(200*time.Millisecond))
	beam.ParDo0(s, &collectFn{Name: name, Addr: srv.Addr}, msgs)

	// Keep publishing until the stop, so the readers are busy when it comes.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for i := 200; ctx.Err() == nil; i++ {
			srv.PublishRaw("in", []byte(strconv.Itoa(i)), nil)
			time.Sleep(5 * time.Millisecond)
		}
	}()
	go func() {
		for len(c.messages()) < 300 && ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
		}
		st.Stop()
	}()
	_, err := runPipeline(t, p, 60*time.Second)
	cancel()
	require.NoError(t, err)

	seen := map[string]bool{}
	for _, m := range c.messages() {
		seen[m.MessageID] = true
	}
	require.GreaterOrEqual(t, len(seen), 300)
	for _, id := range srv.Unacked("in") {
		assert.False(t, seen[id], "message %s was emitted but never acked", id)
	}
	assert.Positive(t, len(srv.Unacked("in")), "publishing went on after the stop: those messages stay for the next run")
	assert.Empty(t, c.ackedEarly, "no message acked while its bundle was in flight")
	assert.Equal(t, readers, st.Ended(), "every reader ended")
	assert.Equal(t, int64(len(c.messages())), st.Claimed(), "the Stopper counted every message emitted")
	assert.Equal(t, st.Claimed(), st.Acked(), "and, once the readers ended, every one acked")
}

func TestStopWithRejectsNil(t *testing.T) {
	_, err := newReadConfig("projects/p/subscriptions/s", []ReadOption{StopWith(nil)})
	require.ErrorContains(t, err, "StopWith(nil)")
}

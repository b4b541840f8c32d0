package pubsubio

import (
	"context"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"strconv"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/beamdedup/beamdedup/internal/unbounded"
	"github.com/beamdedup/beamdedup/testing/pubsubtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A stop request ends readers that would otherwise read forever (no
// IdleStop); everything they emitted reaches Ack and is acked, nothing
// before, and what they never pulled stays on the subscription.
func TestAStopRequestEndsReadersAndWhatTheyEmittedIsAcked(t *testing.T) {
	srv := pubsubtest.New(t, 0)
	srv.MustTopic(t, "in")
	sub := srv.MustSubscription(t, "in", "in-sub", 30*time.Second)
	publishN(srv, "in", 200)

	name := t.Name()
	c := newCollection(name)
	st, controlled := newControl(t)
	const readers = 2
	p, s := beam.NewPipelineWithRoot()
	msgs := Read(s, sub, Endpoint(srv.Addr), controlled, Readers(readers),
		MaxBundleMessages(50), MaxBundleDuration(200*time.Millisecond))
	Ack(s, sub, beam.ParDo(s, &collectFn{Name: name, Addr: srv.Addr}, msgs), Endpoint(srv.Addr))

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
	pr, err := runPipeline(t, p, 60*time.Second)
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
	assert.Empty(t, c.ackedEarly, "no message acked before it reached Ack")
	assert.Equal(t, readers, st.Progress().Ended, "every reader ended")
	assert.Equal(t, int64(len(c.messages())), st.Progress().Claimed, "the control counted every message emitted")
	cs := readCounters(pr)
	assert.Equal(t, cs.Read, cs.Acked, "every message emitted was acked")
}

func TestTheControlOptionRejectsNil(t *testing.T) {
	_, err := newConfig("pubsubio.Read", readOptions, []Option{unbounded.ControlOption[Option](nil)})
	require.ErrorContains(t, err, "a nil control")
}

// Closing the control of a run that still holds messages (its job failed
// with them in flight) hands them back at once, for the next run.
func TestClosingTheControlHandsBackWhatItsRunHolds(t *testing.T) {
	srv := pubsubtest.New(t, 0)
	srv.MustTopic(t, "in")
	sub := srv.MustSubscription(t, "in", "in-sub", 30*time.Second)
	publishN(srv, "in", 20)

	st, controlled := newControl(t)
	p, s := beam.NewPipelineWithRoot()
	name := t.Name()
	c := newCollection(name)
	beam.ParDo(s, &collectFn{Name: name}, Read(s, sub, Endpoint(srv.Addr), controlled, IdleStop(time.Second)))
	_, err := runPipeline(t, p, 60*time.Second)
	require.NoError(t, err)
	require.Len(t, c.messages(), 20, "read, never acked: held with their leases of 60s")

	st.Close()
	resp, err := srv.Subs.Pull(context.Background(), &pubsubpb.PullRequest{Subscription: sub, MaxMessages: 100})
	require.NoError(t, err)
	assert.Len(t, resp.GetReceivedMessages(), 20, "handed back: delivered again at once")
}

package pubsubio

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/beamdedup/beamdedup/testing/pubsubtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// publishN publishes n messages "0".."n-1" with attribute seq.
func publishN(srv *pubsubtest.Server, topic string, n int) {
	for i := range n {
		srv.PublishRaw(topic, []byte(strconv.Itoa(i)), map[string]string{"seq": strconv.Itoa(i)})
	}
}

func TestReadEmitsEveryMessageAndAcksEachAfterItsBundle(t *testing.T) {
	for _, readers := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d readers", readers), func(t *testing.T) {
			srv := pubsubtest.New(t, 0)
			srv.MustTopic(t, "in")
			sub := srv.MustSubscription(t, "in", "in-sub", 30*time.Second)
			const n = 500
			publishN(srv, "in", n)

			name := t.Name()
			c := newCollection(name)
			p, s := beam.NewPipelineWithRoot()
			msgs := Read(s, sub, Endpoint(srv.Addr), IdleStop(time.Second), Readers(readers),
				MaxBundleMessages(100), MaxBundleDuration(300*time.Millisecond))
			beam.ParDo0(s, &collectFn{Name: name, Addr: srv.Addr}, msgs)
			_, err := runPipeline(t, p, 60*time.Second)
			require.NoError(t, err)

			got := map[string]int{}
			for _, m := range c.messages() {
				got[string(m.Data)]++
				assert.Equal(t, string(m.Data), m.Attributes["seq"])
				assert.False(t, m.PublishTime.IsZero())
			}
			assert.Len(t, got, n, "every message emitted")
			assert.Empty(t, srv.Unacked("in"), "every message acked")
			assert.Empty(t, c.ackedEarly, "no message acked while its bundle was in flight")
			// At most 100 per bundle: the acks come in several calls, one per resumed residual.
			assert.GreaterOrEqual(t, len(srv.AckCalls()), n/100)
		})
	}
}

func TestFailedBundleAcksNothing(t *testing.T) {
	srv := pubsubtest.New(t, 0)
	srv.MustTopic(t, "in")
	sub := srv.MustSubscription(t, "in", "in-sub", 30*time.Second)
	publishN(srv, "in", 50)

	p, s := beam.NewPipelineWithRoot()
	msgs := Read(s, sub, Endpoint(srv.Addr), IdleStop(time.Second))
	beam.ParDo0(s, &failFn{}, msgs)
	_, err := runPipeline(t, p, 60*time.Second)
	require.Error(t, err, "the bundle must fail")

	assert.Empty(t, srv.AckCalls(), "a bundle that was never committed must not be acked")
	assert.Len(t, srv.Unacked("in"), 50)
}

func TestLeaseExtensionKeepsSlowMessageFromRedelivery(t *testing.T) {
	tests := []struct {
		name        string
		lease       bool
		redelivered bool
	}{
		{name: "with lease extension", lease: true, redelivered: false},
		{name: "without lease extension (control)", lease: false, redelivered: true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := pubsubtest.New(t, time.Second)
			srv.MustTopic(t, "in")
			sub := srv.MustSubscription(t, "in", "in-sub", time.Second)
			publishN(srv, "in", 5)

			name := fmt.Sprintf("%s/%d", t.Name(), i)
			newCollection(name)
			opts := []ReadOption{Endpoint(srv.Addr), IdleStop(time.Second), AckDeadline(2 * time.Second),
				MaxBundleDuration(4 * time.Second)}
			if !tt.lease {
				opts = append(opts, withoutLease())
			}
			p, s := beam.NewPipelineWithRoot()
			// The first message takes 2.5 s downstream, 2.5x the subscription's
			// deadline; the bundle then keeps pulling, which would redeliver it.
			beam.ParDo0(s, &collectFn{Name: name, Addr: srv.Addr, SleepFirstMs: 2500}, Read(s, sub, opts...))
			_, err := runPipeline(t, p, 60*time.Second)
			require.NoError(t, err)

			redelivered := 0
			for _, m := range srv.MessagesOn("in") {
				if m.Deliveries > 1 {
					redelivered++
				}
			}
			assert.Equal(t, tt.redelivered, redelivered > 0, "redelivered messages: %d", redelivered)
			assert.Empty(t, srv.Unacked("in"))
		})
	}
}

func TestIdleStopEndsThePipeline(t *testing.T) {
	srv := pubsubtest.New(t, 0)
	srv.MustTopic(t, "in")
	sub := srv.MustSubscription(t, "in", "in-sub", 10*time.Second)

	p, s := beam.NewPipelineWithRoot()
	beam.ParDo0(s, &collectFn{Name: t.Name()}, Read(s, sub, Endpoint(srv.Addr), IdleStop(time.Second), Readers(2)))
	newCollection(t.Name())
	start := time.Now()
	_, err := runPipeline(t, p, 60*time.Second)
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 30*time.Second)
}

func TestTrackerCheckpointCarriesClaimedAckIDs(t *testing.T) {
	tr := newTracker(Restriction{AckIDs: []string{"old"}}, time.UnixMilli(5))
	require.True(t, tr.TryClaim("a"))
	require.True(t, tr.TryClaim("b"))

	p, r, err := tr.TrySplit(0.5)
	require.NoError(t, err)
	assert.Nil(t, r, "only checkpoints split a reader")
	assert.Equal(t, Restriction{AckIDs: []string{"old"}}, p)
	assert.False(t, tr.IsDone())

	p, r, err = tr.TrySplit(0)
	require.NoError(t, err)
	assert.Equal(t, Restriction{AckIDs: []string{}}, p, "the primary owes nothing (never a nil slice: Java runners cannot decode it)")
	require.IsType(t, Restriction{}, r)
	assert.Equal(t, []string{"a", "b"}, r.(Restriction).AckIDs)
	assert.Greater(t, r.(Restriction).LastActivityMs, int64(5))
	assert.True(t, tr.IsDone())
	assert.False(t, tr.TryClaim("c"), "no claim after a checkpoint")
}

func TestEventTimeUsesAttributeElsePublishTime(t *testing.T) {
	pub := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name  string
		attrs map[string]string
		want  time.Time
	}{
		{"rfc3339", map[string]string{"ts": "2025-05-06T07:08:09Z"}, time.Date(2025, 5, 6, 7, 8, 9, 0, time.UTC)},
		{"epoch millis", map[string]string{"ts": "1000"}, time.UnixMilli(1000)},
		{"missing", nil, pub},
		{"garbage", map[string]string{"ts": "yesterday"}, pub},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := eventTime(Message{PublishTime: pub, Attributes: tt.attrs}, "ts")
			assert.True(t, tt.want.Equal(got), "got %v want %v", got, tt.want)
		})
	}
}

func TestTryReadRejectsBadConfiguration(t *testing.T) {
	tests := []struct {
		name string
		sub  string
		opts []ReadOption
		want string
	}{
		{"short name", "sub", nil, "not a full subscription name"},
		{"topic name", "projects/p/topics/t", nil, "not a full subscription name"},
		{"ack deadline", "projects/p/subscriptions/s", []ReadOption{AckDeadline(time.Hour)}, "AckDeadline"},
		{"readers", "projects/p/subscriptions/s", []ReadOption{Readers(0)}, "Readers"},
		{"idle stop", "projects/p/subscriptions/s", []ReadOption{IdleStop(-time.Second)}, "IdleStop"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, s := beam.NewPipelineWithRoot()
			_, err := TryRead(s, tt.sub, tt.opts...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestReadHonoursPubsubEmulatorHost(t *testing.T) {
	srv := pubsubtest.New(t, 0)
	srv.MustTopic(t, "in")
	sub := srv.MustSubscription(t, "in", "in-sub", 10*time.Second)
	publishN(srv, "in", 20)
	t.Setenv("PUBSUB_EMULATOR_HOST", srv.Addr)

	name := t.Name()
	c := newCollection(name)
	p, s := beam.NewPipelineWithRoot()
	beam.ParDo0(s, &collectFn{Name: name}, Read(s, sub, IdleStop(time.Second))) // no Endpoint option
	_, err := runPipeline(t, p, 60*time.Second)
	require.NoError(t, err)
	assert.Len(t, c.messages(), 20)
	assert.Empty(t, srv.Unacked("in"))
}

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

func TestReadEmitsEveryMessageAndAckAcksEachOnceItGetsThere(t *testing.T) {
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
			seen := beam.ParDo(s, &collectFn{Name: name, Addr: srv.Addr}, msgs)
			Ack(s, sub, seen, Endpoint(srv.Addr))
			pr, err := runPipeline(t, p, 60*time.Second)
			require.NoError(t, err)

			got := map[string]int{}
			for _, m := range c.messages() {
				got[string(m.Data)]++
				assert.Equal(t, string(m.Data), m.Attributes["seq"])
				assert.False(t, m.PublishTime.IsZero())
				assert.NotEmpty(t, m.AckID)
			}
			assert.Len(t, got, n, "every message emitted")
			assert.Empty(t, srv.Unacked("in"), "every message acked")
			assert.Empty(t, c.ackedEarly, "no message acked before it reached Ack")
			cs := readCounters(pr)
			assert.Equal(t, int64(n), cs.Read)
			assert.Equal(t, int64(n), cs.Acked)
			assert.Zero(t, cs.AckedUnheld, "every message acked was held by its reader in this process")
		})
	}
}

// What never reaches Ack is never acked: the job ends (idle stop) with
// every message still on the subscription.
func TestReadAloneAcksNothing(t *testing.T) {
	srv := pubsubtest.New(t, 0)
	srv.MustTopic(t, "in")
	sub := srv.MustSubscription(t, "in", "in-sub", 30*time.Second)
	publishN(srv, "in", 50)

	name := t.Name()
	c := newCollection(name)
	p, s := beam.NewPipelineWithRoot()
	beam.ParDo(s, &collectFn{Name: name, Addr: srv.Addr}, Read(s, sub, Endpoint(srv.Addr), IdleStop(time.Second)))
	_, err := runPipeline(t, p, 60*time.Second)
	require.NoError(t, err)
	assert.Len(t, c.messages(), 50)
	assert.Empty(t, srv.AckCalls())
	assert.Len(t, srv.Unacked("in"), 50)
}

func TestFailedBundleAcksNothing(t *testing.T) {
	srv := pubsubtest.New(t, 0)
	srv.MustTopic(t, "in")
	sub := srv.MustSubscription(t, "in", "in-sub", 30*time.Second)
	publishN(srv, "in", 50)

	p, s := beam.NewPipelineWithRoot()
	msgs := Read(s, sub, Endpoint(srv.Addr), IdleStop(time.Second))
	beam.ParDo0(s, &failFn{}, msgs)
	Ack(s, sub, msgs, Endpoint(srv.Addr))
	_, err := runPipeline(t, p, 60*time.Second)
	require.Error(t, err, "the bundle must fail")

	assert.Empty(t, srv.AckCalls(), "a bundle that failed must not be acked")
	assert.Len(t, srv.Unacked("in"), 50)
}

// A message slower downstream than its lease: with leasing it is never
// redelivered; without (the control), Pub/Sub redelivers it while it is in
// flight, the reader absorbs the redelivery (it is emitted once), and Ack
// acks it with the redelivery's ack id, the only one the fake still honours.
func TestLeaseKeepsASlowMessageFromRedeliveryAndAReaderAbsorbsOne(t *testing.T) {
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
			c := newCollection(name)
			opts := []Option{Endpoint(srv.Addr), IdleStop(time.Second), AckDeadline(2 * time.Second),
				MaxBundleDuration(4 * time.Second)}
			if !tt.lease {
				opts = append(opts, withoutLease())
			}
			p, s := beam.NewPipelineWithRoot()
			// The first message takes 2.5 s downstream, 2.5x the subscription's
			// deadline; the bundle then keeps pulling, which would redeliver it.
			seen := beam.ParDo(s, &collectFn{Name: name, Addr: srv.Addr, SleepFirstMs: 2500}, Read(s, sub, opts...))
			Ack(s, sub, seen, Endpoint(srv.Addr))
			pr, err := runPipeline(t, p, 60*time.Second)
			require.NoError(t, err)

			redelivered, again := 0, 0
			for _, m := range srv.MessagesOn("in") {
				if m.Deliveries > 1 {
					redelivered++
					again += m.Deliveries - 1
				}
			}
			assert.Equal(t, tt.redelivered, redelivered > 0, "redelivered messages: %d", redelivered)
			assert.Len(t, c.messages(), 5, "each message emitted once")
			assert.Equal(t, int64(again), readCounters(pr).Absorbed, "every redelivery absorbed")
			assert.Empty(t, srv.Unacked("in"))
		})
	}
}

func TestIdleStopEndsThePipeline(t *testing.T) {
	srv := pubsubtest.New(t, 0)
	srv.MustTopic(t, "in")
	sub := srv.MustSubscription(t, "in", "in-sub", 10*time.Second)

	p, s := beam.NewPipelineWithRoot()
	beam.ParDo(s, &collectFn{Name: t.Name()}, Read(s, sub, Endpoint(srv.Addr), IdleStop(time.Second), Readers(2)))
	newCollection(t.Name())
	start := time.Now()
	_, err := runPipeline(t, p, 60*time.Second)
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 30*time.Second)
}

func TestTrackerClaimsUntilACheckpoint(t *testing.T) {
	tr := newTracker(restriction{}, time.UnixMilli(5))
	require.True(t, tr.TryClaim("a"))
	require.True(t, tr.TryClaim("b"))

	p, r, err := tr.TrySplit(0.5)
	require.NoError(t, err)
	assert.Nil(t, r, "only checkpoints split a reader")
	assert.Equal(t, restriction{}, p)
	assert.False(t, tr.IsDone())

	p, r, err = tr.TrySplit(0)
	require.NoError(t, err)
	assert.Equal(t, restriction{}, p, "the primary is the finished bundle")
	require.IsType(t, restriction{}, r)
	assert.Greater(t, r.(restriction).LastActivityMs, int64(5))
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

func TestTryReadRejectsBadConfigurationNamingEveryMistake(t *testing.T) {
	const sub = "projects/p/subscriptions/s"
	tests := []struct {
		name string
		sub  string
		opts []Option
		want []string
	}{
		{"short name", "sub", nil, []string{`pubsubio.Read: "sub" is not a full subscription name; want projects/PROJECT/subscriptions/NAME`}},
		{"topic name", "projects/p/topics/t", nil, []string{"not a full subscription name (that names a topic)"}},
		{"ack deadline", sub, []Option{AckDeadline(time.Hour)}, []string{"AckDeadline(1h0m0s): want 1s to 600s"}},
		{"readers", sub, []Option{Readers(0)}, []string{"Readers(0)"}},
		{"idle stop", sub, []Option{IdleStop(-time.Second)}, []string{"IdleStop(-1s)"}},
		{"nil option", sub, []Option{IdleStop(time.Second), nil}, []string{"option 2 of 2 is nil"}},
		{"empty names", sub, []Option{Endpoint(""), IDAttribute(""), TimestampAttribute("")},
			[]string{`Endpoint("")`, `IDAttribute("")`, `TimestampAttribute("")`}},
		{"a Write option", sub, []Option{publishBatch(10)}, []string{"publishBatch does not apply to pubsubio.Read"}},
		{"several at once", "s", []Option{Readers(-1), nil}, []string{"not a full subscription name", "Readers(-1)", "option 2 of 2 is nil"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, s := beam.NewPipelineWithRoot()
			_, err := TryRead(s, tt.sub, tt.opts...)
			require.Error(t, err)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.NotContains(t, err.Error(), "\n", "one line")
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
	Ack(s, sub, beam.ParDo(s, &collectFn{Name: name}, Read(s, sub, IdleStop(time.Second)))) // no Endpoint option
	_, err := runPipeline(t, p, 60*time.Second)
	require.NoError(t, err)
	assert.Len(t, c.messages(), 20)
	assert.Empty(t, srv.Unacked("in"))
}

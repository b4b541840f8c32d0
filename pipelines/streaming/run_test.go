package streaming

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/internal/jobrun"
	"github.com/beamdedup/beamdedup/pipelines/orders"
	"github.com/beamdedup/beamdedup/testing/prismtest"
	"github.com/beamdedup/beamdedup/testing/pubsubtest"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/pubsubio"
)

func TestStatusDrainedOnlyWhenEverythingReadWasSettledAndWritten(t *testing.T) {
	// 10 deliveries: 2 undecodable, 8 rows of which 5 distinct keys.
	drained := Status{Read: 10, Settled: 10, DeadLettered: 2, Written: 7, ReadersEnded: 2, Readers: 2,
		Dedup: dedup.Counters{RowsIn: 8, Emitted: 5, DuplicatesDropped: 3}}
	tests := []struct {
		name   string
		change func(*Status)
		want   bool
	}{
		{"all accounted for", func(*Status) {}, true},
		{"a reader still running", func(s *Status) { s.ReadersEnded = 1 }, false},
		{"last bundle not yet settled", func(s *Status) { s.Settled = 7 }, false},
		{"rows still on their way to KeepFirst", func(s *Status) { s.Dedup.RowsIn, s.Dedup.DuplicatesDropped = 6, 1 }, false},
		{"a kept row or dead letter not yet written", func(s *Status) { s.Written = 6 }, false},
		{"a row KeepFirst refused not yet written", func(s *Status) { s.Dedup.DeadLettered = 1 }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := drained
			tt.change(&s)
			assert.Equal(t, tt.want, s.Drained())
		})
	}
}

func TestRunRejectsIncompleteOrMalformedPubsubNames(t *testing.T) {
	ok := PubSub{Subscription: "projects/p/subscriptions/s", OutputTopic: "projects/p/topics/o", DeadLetterTopic: "projects/p/topics/d"}
	tests := []struct {
		name   string
		change func(*PubSub)
		want   string
	}{
		{"no dead-letter topic", func(c *PubSub) { c.DeadLetterTopic = "" }, "Run needs DeadLetterTopic"},
		{"short subscription", func(c *PubSub) { c.Subscription = "s" }, "not a full subscription name"},
		{"native", func(c *PubSub) { c.Native = true }, "Native is for Dataflow"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := ok
			tt.change(&src)
			_, err := Run(context.Background(), prismtest.Job(t), src, RunConfig{})
			assert.ErrorContains(t, err, tt.want)
		})
	}
}

// liveFake starts a Pub/Sub fake with the input topic "in", its
// subscription, and the output and dead-letter topics.
func liveFake(t *testing.T) (srv *pubsubtest.Server, sub, out, dlq string) {
	srv = pubsubtest.New(t, 0)
	srv.MustTopic(t, "in")
	out = srv.MustTopic(t, "out")
	dlq = srv.MustTopic(t, "dlq")
	sub = srv.MustSubscription(t, "in", "in-sub", 10*time.Second)
	return srv, sub, out, dlq
}

// The stop comes while messages keep arriving and bundles are in flight:
// every message the job read is acked, every order it read is published
// once, and what it never read stays on the subscription.
func TestRunLiveStoppedMidStreamAcksAndPublishesEverythingItRead(t *testing.T) {
	srv, sub, out, dlq := liveFake(t)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stopCtx, stop := context.WithCancel(ctx)
	defer stop()
	publishing, quit := context.WithCancel(ctx)
	defer quit()
	go func() { // each order twice, every 50th payload undecodable, until the test ends
		for i := 0; publishing.Err() == nil; i++ {
			b, _ := json.Marshal(orders.Order{OrderID: fmt.Sprintf("o-%06d", i), Quantity: 1, Price: 1, CreatedAt: time.Unix(int64(i), 0).UTC()})
			srv.PublishRaw("in", b, nil)
			srv.PublishRaw("in", b, nil)
			if i%50 == 0 {
				srv.PublishRaw("in", []byte("not json"), map[string]string{"case": "undecodable"})
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	go func() {
		for len(srv.MessagesOn("out")) < 300 && stopCtx.Err() == nil {
			time.Sleep(50 * time.Millisecond)
		}
		stop()
	}()
	done := make(chan struct{})
	var res Result
	var err error
	go func() {
		defer close(done)
		res, err = Run(stopCtx, prismtest.Job(t), PubSub{Subscription: sub, OutputTopic: out, DeadLetterTopic: dlq, Endpoint: srv.Addr,
			Read: []pubsubio.Option{pubsubio.MaxBundleDuration(200 * time.Millisecond)}, Readers: 2},
			RunConfig{DrainTimeout: time.Minute})
	}()
	select {
	case <-done:
	case <-ctx.Done():
		require.FailNow(t, "Run did not return within 2 minutes")
	}
	quit()
	require.NoError(t, err)
	t.Log(res.Status)
	assert.True(t, res.Stopped, "drained, then cancelled")
	assert.True(t, res.Drained())

	keys := map[string]bool{}
	undecodable, unread := 0, 0
	for _, m := range srv.MessagesOn("in") {
		if m.Deliveries == 0 {
			unread++
			continue
		}
		assert.Positive(t, m.Acks, "message %s was read and never acked", m.ID)
		if m.Attributes["case"] == "undecodable" {
			undecodable += m.Deliveries
			continue
		}
		var o orders.Order
		require.NoError(t, json.Unmarshal(m.Data, &o))
		keys[o.OrderID] = true
	}
	outKeys := map[string]int{}
	for _, m := range srv.MessagesOn("out") {
		var o orders.Order
		require.NoError(t, json.Unmarshal(m.Data, &o))
		outKeys[o.OrderID]++
	}
	assert.Len(t, outKeys, len(keys), "every order read is on the output topic")
	for k, n := range outKeys {
		assert.Equal(t, 1, n, "outputs of %s", k)
		assert.True(t, keys[k], "%s was output but never read", k)
	}
	assert.Equal(t, undecodable, len(srv.MessagesOn("dlq")), "one dead letter per delivery of an undecodable message")
	assert.Positive(t, unread, "publishing went on after the stop; those messages wait for the next run")
	assert.Equal(t, res.Read, res.Settled)
}

// A live job whose subscription goes quiet is idle, not stalled: it is
// watched for several stall limits with nothing to read and never reported.
func TestRunLiveNeverReportsAnIdleSubscriptionAsAStall(t *testing.T) {
	srv, sub, out, dlq := liveFake(t)
	for i := range 20 {
		b, _ := json.Marshal(orders.Order{OrderID: fmt.Sprintf("o-%d", i), Quantity: 1, Price: 1, CreatedAt: time.Unix(int64(i), 0).UTC()})
		srv.PublishRaw("in", b, nil)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	stopCtx, stop := context.WithCancel(ctx)
	defer stop()
	const limit = 2 * time.Second
	idle := make(chan time.Time, 1)
	go func() { // all 20 out, then idle for 4 stall limits, then stop
		for len(srv.MessagesOn("out")) < 20 && stopCtx.Err() == nil {
			time.Sleep(50 * time.Millisecond)
		}
		idle <- time.Now()
		time.Sleep(4 * limit)
		stop()
	}()
	res, err := Run(stopCtx, withStallLimit(prismtest.Job(t), limit), PubSub{Subscription: sub, OutputTopic: out, DeadLetterTopic: dlq, Endpoint: srv.Addr},
		RunConfig{DrainTimeout: 30 * time.Second})
	require.NoError(t, err, "an idle job is not stalled")
	require.NoError(t, ctx.Err(), "Run returned in time")
	assert.GreaterOrEqual(t, time.Since(<-idle), 4*limit, "watched while idle for 4 stall limits")
	assert.True(t, res.Drained())
	assert.Equal(t, int64(20), res.Dedup.Emitted)
}

// stuckRow is a row whose validation blocks for the order "stuck": a step
// of the job that holds work and never finishes it.
type stuckRow struct {
	OrderID string `json:"order_id" beam:"order_id"`
}

var unstick = make(chan struct{})

func (r *stuckRow) Validate() error {
	if r.OrderID == "stuck" {
		select {
		case <-unstick:
		case <-time.After(30 * time.Second):
		}
	}
	return nil
}

func init() { Register[stuckRow]() }

// A live job whose source bundle never ends (its decode step blocks) is
// reported with the step that stalled and cancelled, not left to hang:
// its bundle commits nothing, so only the source's own counts show it.
func TestRunLiveReportsAStepThatHoldsWorkAndFinishesNone(t *testing.T) {
	defer close(unstick)
	srv, sub, out, dlq := liveFake(t)
	for _, id := range []string{"a", "b", "stuck", "c"} {
		srv.PublishRaw("in", []byte(`{"order_id": "`+id+`"}`), nil)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	start := time.Now()
	src := PubSub{Subscription: sub, OutputTopic: out, DeadLetterTopic: dlq, Endpoint: srv.Addr}
	_, err := RunFor[stuckRow](ctx, withStallLimit(prismtest.Job(t), 3*time.Second), src, RunConfig{Config: Config{PartitionBy: []string{"order_id"}}})
	var stall *jobrun.Stall
	require.ErrorAs(t, err, &stall, "got %v", err)
	t.Log(err, " after ", time.Since(start))
	assert.Equal(t, stageName(stageSource, src.spec()), stall.Stage.Name)
	assert.Positive(t, stall.Stage.Waiting)
	assert.ErrorContains(t, err, "waits on Pub/Sub (emulator at "+srv.Addr+") or on a step fused with it")
	assert.NoError(t, ctx.Err(), "reported before the test's deadline")
}

func withStallLimit(o jobrun.Options, limit time.Duration) jobrun.Options {
	o.StallLimit = limit
	return o
}

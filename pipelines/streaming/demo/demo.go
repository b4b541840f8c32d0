// Package demo runs the Pub/Sub deduplication pipeline of
// pipelines/streaming against a Pub/Sub fake in this process: a scripted
// stream with exact duplicates, publisher retries, lost acks (so
// redeliveries) and undecodable payloads, and a report of what came out.
// It is what `runjob --pipeline=streaming` runs, and what the pipeline's
// end-to-end tests check.
//
// It links the fake (cloud.google.com/go/pubsub/v2/pstest), which is why
// it is a package of its own: importing pipelines/streaming links no fake.
package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"cloud.google.com/go/pubsub/v2/pstest"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamdedup/beamdedup/internal/jobrun"
	"github.com/beamdedup/beamdedup/pipelines/orders"
	"github.com/beamdedup/beamdedup/pipelines/streaming"
	"github.com/beamdedup/beamdedup/testing/pubsubtest"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/pubsubio"
)

// Config scripts Run's stream. Zero values take the defaults.
type Config struct {
	// Keys is the number of distinct orders (default 200). Every order
	// priced under 100 is published twice with the same payload (an exact
	// duplicate), as in the orders scenario.
	Keys int
	// RetryEvery: every RetryEvery-th order is published once more, later,
	// as a publisher retry (same payload, new message id, attribute
	// "retry"="1"). Default 10; negative disables.
	RetryEvery int
	// LostAckEvery: the first ack of every LostAckEvery-th message is lost,
	// so Pub/Sub redelivers it after the ack deadline. Default 7 on Prism;
	// negative disables. On Flink the default is none: there the kept rows
	// come out only once the source has ended (docs/runners.md), so their
	// messages are acked after the readers stopped, and one whose ack is
	// lost is not read again in the run (it waits for the next, unacked).
	LostAckEvery int
	// Undecodable is the number of payloads that are not JSON orders
	// (default 3); they must reach the dead-letter topic.
	Undecodable int
	// Seed makes quantities and prices reproducible (default 1).
	Seed uint64
	// IdleStop ends the source after this long without messages (default 5s;
	// it must exceed the 2s lease after which lost acks are redelivered).
	IdleStop time.Duration
	// StateTTL is the key retention, as dedup.StateTTL: 0 (the default)
	// remembers keys for the whole run. The demo sets no cleanup timers
	// (dedup.CleanupTimers(false)): processing-time ones would keep Prism's
	// job alive for StateTTL after the idle stop, and expiry is checked
	// when a row arrives anyway.
	StateTTL time.Duration
}

// Result is what Run observed. Counts of messages come from the
// Pub/Sub fake, the dedup counts from the job's metrics.
type Result struct {
	Published    int // messages published to the input topic
	Keys         int // distinct order ids among them
	Delivered    int // deliveries of input messages, redeliveries included
	Redelivered  int // input messages delivered more than once
	AcksLost     int // acks the script dropped
	Acked        int // input messages acked
	Unacked      int // input messages never acked (0 on success)
	Emitted      int // messages on the output topic
	OutputKeys   int // distinct order ids on the output topic
	DeadLettered int // messages on the dead-letter topic
	Undecodable  int // undecodable messages published
	// RowsDelivered counts deliveries of decodable messages: the rows that
	// entered KeepFirst (Dedup.RowsIn).
	RowsDelivered int
	Dedup         dedup.Counters
	Elapsed       time.Duration
	// LatencyP50 and LatencyP99: for each output message, its publish time
	// minus the first publish time of its order's input message.
	LatencyP50, LatencyP99 time.Duration
}

// String is a short report.
func (r Result) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "published %d messages for %d orders (%d undecodable), %d deliveries (%d redelivered after %d lost acks)\n",
		r.Published, r.Keys, r.Undecodable, r.Delivered, r.Redelivered, r.AcksLost)
	fmt.Fprintf(&b, "dedup: %d rows in, %d emitted, %d duplicates dropped\n",
		r.Dedup.RowsIn, r.Dedup.Emitted, r.Dedup.DuplicatesDropped)
	fmt.Fprintf(&b, "output topic: %d messages for %d distinct orders; dead-letter topic: %d\n", r.Emitted, r.OutputKeys, r.DeadLettered)
	fmt.Fprintf(&b, "latency (input publish to output publish) p50 %v, p99 %v\n", r.LatencyP50.Round(time.Millisecond), r.LatencyP99.Round(time.Millisecond))
	fmt.Fprintf(&b, "acked %d of %d input messages (%d unacked) in %v", r.Acked, r.Published, r.Unacked, r.Elapsed.Round(time.Millisecond))
	return b.String()
}

// OK reports whether the run met the pipeline's promise: one output per
// key, every input message acked, every undecodable message dead-lettered.
func (r Result) OK() bool {
	return r.Emitted == r.Keys && r.OutputKeys == r.Keys && r.Unacked == 0 && r.DeadLettered == r.Undecodable
}

func (c *Config) defaults(runner string) {
	if c.Keys <= 0 {
		c.Keys = 200
	}
	if c.RetryEvery == 0 {
		c.RetryEvery = 10
	}
	if c.LostAckEvery == 0 && (runner == "flink" || runner == "spark") {
		c.LostAckEvery = -1
	}
	if c.LostAckEvery == 0 {
		c.LostAckEvery = 7
	}
	if c.Undecodable == 0 {
		c.Undecodable = 3
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.IdleStop <= 0 {
		c.IdleStop = 5 * time.Second
	}
}

// Run starts an in-process Pub/Sub fake, creates the input, output and
// dead-letter topics and the subscription, publishes a scripted stream with
// exact duplicates, publisher retries, lost acks (so redeliveries) and
// undecodable payloads, runs the pipeline as a job with an idle stop
// (job: the runner and its job server; streaming.Watched watches it), and
// returns what happened. beam.Init must have been called (beamx/ptest
// mains do). The SDK workers reach the fake at a loopback address: run
// them on this machine (LOOPBACK, or a worker pool here).
//
// It lowers pstest's process-wide minimum ack deadline to 1s for the run so
// that redeliveries come within seconds.
func Run(ctx context.Context, job jobrun.Options, cfg Config) (Result, error) {
	cfg.defaults(job.Runner)
	pstest.SetMinAckDeadline(time.Second)
	defer pstest.ResetMinAckDeadline()
	srv, err := pubsubtest.StartAt(ctx, "127.0.0.1:0")
	if err != nil {
		return Result{}, err
	}
	defer srv.Close()

	for _, t := range []string{"orders", "orders-deduped", "orders-dlq"} {
		if _, err := srv.CreateTopic(ctx, t); err != nil {
			return Result{}, err
		}
	}
	sub, err := srv.CreateSubscription(ctx, "orders", "orders-sub", 10*time.Second)
	if err != nil {
		return Result{}, err
	}

	first, later, keys := script(cfg)
	lost := map[string]bool{}
	for i, m := range first {
		id := srv.PublishRaw("orders", m.data, m.attrs)
		if cfg.LostAckEvery > 0 && i%cfg.LostAckEvery == 0 && m.attrs == nil {
			lost[id+":1"] = true // the first delivery's ack id in pstest
		}
	}
	srv.DropAcks(func(ackID string) bool { return lost[ackID] })

	p, s := beam.NewPipelineWithRoot()
	_, err = streaming.Build(s, streaming.Config{
		Subscription:    sub,
		OutputTopic:     srv.TopicName("orders-deduped"),
		DeadLetterTopic: srv.TopicName("orders-dlq"),
		Endpoint:        srv.Addr,
		// No cleanup timers: the job ends at the idle stop.
		Dedup: []dedup.Option{dedup.StateTTL(cfg.StateTTL), dedup.CleanupTimers(false)},
		Read: []pubsubio.Option{
			pubsubio.IdleStop(cfg.IdleStop),
			pubsubio.AckDeadline(2 * time.Second), // lost acks come back within seconds
			pubsubio.MaxBundleDuration(500 * time.Millisecond),
		},
	})
	if err != nil {
		return Result{}, err
	}

	// Publisher retries arrive while the job runs.
	go func() {
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
			return
		}
		for _, m := range later {
			srv.PublishRaw("orders", m.data, m.attrs)
		}
	}()

	start := time.Now()
	total := len(first) + len(later)
	pr, err := jobrun.Run(ctx, p, streaming.Watched(job, func(c map[string]int64) bool {
		// Cheap on purpose: MessagesOn copies every message under the
		// fake's lock, which slows its Pulls enough to trip the IdleStop.
		acked := srv.AckedMessages()
		c["pubsub/acked"] = int64(acked)
		return acked < total
	}))
	if err != nil {
		return Result{}, fmt.Errorf("streaming demo: %w", err)
	}
	res := Result{Keys: keys, Elapsed: time.Since(start), AcksLost: len(lost), Dedup: dedup.ReadCounters(pr)}
	published := map[string]time.Time{} // order id -> first input publish time
	for _, m := range srv.MessagesOn("orders") {
		var o orders.Order
		if json.Unmarshal(m.Data, &o) == nil {
			if t, ok := published[o.OrderID]; !ok || m.PublishTime.Before(t) {
				published[o.OrderID] = m.PublishTime
			}
		}
		res.Published++
		res.Delivered += m.Deliveries
		if m.Deliveries > 1 {
			res.Redelivered++
		}
		if m.Attributes["case"] != "undecodable" {
			res.RowsDelivered += m.Deliveries
		} else {
			res.Undecodable++
		}
		if m.Acks > 0 {
			res.Acked++
		} else {
			res.Unacked++
		}
	}
	outKeys := map[string]bool{}
	var lat []time.Duration
	for _, m := range srv.MessagesOn("orders-deduped") {
		res.Emitted++
		var o orders.Order
		if json.Unmarshal(m.Data, &o) == nil {
			outKeys[o.OrderID] = true
			if t, ok := published[o.OrderID]; ok {
				lat = append(lat, m.PublishTime.Sub(t))
			}
		}
	}
	res.OutputKeys = len(outKeys)
	if len(lat) > 0 {
		slices.Sort(lat)
		res.LatencyP50, res.LatencyP99 = lat[len(lat)/2], lat[len(lat)*99/100]
	}
	res.DeadLettered = len(srv.MessagesOn("orders-dlq"))
	return res, nil
}

type scripted struct {
	data  []byte
	attrs map[string]string
}

// script returns the messages published before the job starts, those
// published while it runs, and the number of distinct orders.
func script(cfg Config) (first, later []scripted, keys int) {
	rng := rand.New(rand.NewPCG(cfg.Seed, 0))
	base := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for i := range cfg.Keys {
		o := orders.Order{
			OrderID:   fmt.Sprintf("o-%06d", i),
			Quantity:  1 + rng.Int64N(9),
			Price:     float64(1+rng.IntN(20000)) / 100,
			CreatedAt: base.Add(time.Duration(i) * time.Second),
		}
		data, _ := json.Marshal(o)
		first = append(first, scripted{data: data})
		if o.Price < 100 {
			first = append(first, scripted{data: data}) // exact duplicate
		}
		if cfg.RetryEvery > 0 && i%cfg.RetryEvery == 0 {
			later = append(later, scripted{data: data, attrs: map[string]string{"retry": "1"}})
		}
	}
	for i := range cfg.Undecodable {
		bad := []string{`{"order_id": "broken`, `not json`, `{"quantity": 3}`}[i%3]
		first = append(first, scripted{data: []byte(bad), attrs: map[string]string{"case": "undecodable"}})
	}
	return first, later, cfg.Keys
}

// Package pubsubdemo is what runjob's streaming demo and the Pub/Sub fake
// that plays it share: the demo's script (the stream the fake publishes:
// orders with exact duplicates, publisher retries, lost acks and
// undecodable payloads), its report (what the fake saw), and the client
// that starts the fake (testing/pubsubtest/cmd/pstestserver, which plays
// the script) as a process of its own and talks to it. Nothing here links
// the fake.
package pubsubdemo

import (
	"cmp"
	"fmt"
	"strings"
	"time"
)

// The demo's topics and subscription (short names, in the fake's project).
const (
	Input        = "orders"
	Output       = "orders-deduped"
	DeadLetters  = "orders-dlq"
	Subscription = "orders-sub"
)

// Script is the demo's stream. Zero values take the defaults (Defaults).
type Script struct {
	// Keys is the number of distinct orders (default 200). Every order
	// priced under 100 is published twice with the same payload (an exact
	// duplicate), as in the orders scenario.
	Keys int
	// RetryEvery: every RetryEvery-th order is published once more, later
	// (Later), as a publisher retry (same payload, new message id,
	// attribute "retry"="1"). Default 10; negative: none.
	RetryEvery int
	// LostAckEvery: the first ack of every LostAckEvery-th message is lost,
	// so Pub/Sub redelivers it after its ack deadline. Default 7; negative:
	// none, which Flink needs: its kept rows are acked only after the
	// readers stopped (docs/streaming.md), too late for a redelivery.
	LostAckEvery int
	// Undecodable is the number of payloads that are not JSON orders
	// (default 3); they must reach the dead-letter topic.
	Undecodable int
	// Seed makes quantities and prices reproducible (default 1).
	Seed uint64
}

// Defaults fills in the zero values.
func (sc Script) Defaults() Script {
	if sc.Keys <= 0 {
		sc.Keys = 200
	}
	sc.RetryEvery = cmp.Or(sc.RetryEvery, 10)
	sc.LostAckEvery = cmp.Or(sc.LostAckEvery, 7)
	sc.Undecodable = cmp.Or(sc.Undecodable, 3)
	sc.Seed = cmp.Or(sc.Seed, 1)
	return sc
}

// Report is what the fake saw of a run of the demo.
type Report struct {
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
	// entered KeepFirst.
	RowsDelivered int
	// LatencyP50 and LatencyP99: for each output message, its publish time
	// minus the first publish time of its order's input message.
	LatencyP50, LatencyP99 time.Duration
}

// OK reports whether the run met the pipeline's promise: one output per
// key, every input message acked, every undecodable message dead-lettered.
func (r Report) OK() bool {
	return r.Emitted == r.Keys && r.OutputKeys == r.Keys && r.Unacked == 0 && r.DeadLettered == r.Undecodable
}

// String is a short report.
func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "published %d messages for %d orders (%d undecodable), %d deliveries (%d redelivered after %d lost acks)\n",
		r.Published, r.Keys, r.Undecodable, r.Delivered, r.Redelivered, r.AcksLost)
	fmt.Fprintf(&b, "output topic: %d messages for %d distinct orders; dead-letter topic: %d\n", r.Emitted, r.OutputKeys, r.DeadLettered)
	fmt.Fprintf(&b, "latency (input publish to output publish) p50 %v, p99 %v\n", r.LatencyP50.Round(time.Millisecond), r.LatencyP99.Round(time.Millisecond))
	fmt.Fprintf(&b, "acked %d of %d input messages (%d unacked)", r.Acked, r.Published, r.Unacked)
	return b.String()
}

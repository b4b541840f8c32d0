// Package pubsubdemo is the streaming demo's script and report: the stream
// a Pub/Sub fake publishes (orders with exact duplicates, publisher
// retries, lost acks and undecodable payloads) and what came of it. The
// fake plays it (testing/pubsubtest, in a test's process or as the
// pstestserver command); runjob --pipeline=streaming starts that command
// and runs the pipeline against it. Neither the script nor the report
// links the fake.
package pubsubdemo

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/beamdedup/beamdedup/pipelines/orders"
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
	// none. On Flink give none: there the kept rows come out only once the
	// source has ended (docs/streaming.md), so their messages are acked
	// after the readers stopped, and one whose ack is lost is not read
	// again in the run.
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
	if sc.RetryEvery == 0 {
		sc.RetryEvery = 10
	}
	if sc.LostAckEvery == 0 {
		sc.LostAckEvery = 7
	}
	if sc.Undecodable == 0 {
		sc.Undecodable = 3
	}
	if sc.Seed == 0 {
		sc.Seed = 1
	}
	return sc
}

// Message is a message to publish.
type Message struct {
	Data  []byte
	Attrs map[string]string
	// LoseAck: the ack of its first delivery is lost.
	LoseAck bool
}

// Messages are the messages published before the job starts and those
// published while it runs (the publisher retries), of sc with its
// defaults.
func (sc Script) Messages() (first, later []Message) {
	sc = sc.Defaults()
	rng := rand.New(rand.NewPCG(sc.Seed, 0))
	base := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for i := range sc.Keys {
		o := orders.Order{
			OrderID:   fmt.Sprintf("o-%06d", i),
			Quantity:  1 + rng.Int64N(9),
			Price:     float64(1+rng.IntN(20000)) / 100,
			CreatedAt: base.Add(time.Duration(i) * time.Second),
		}
		data, _ := json.Marshal(o)
		first = append(first, Message{Data: data})
		if o.Price < 100 {
			first = append(first, Message{Data: data}) // exact duplicate
		}
		if sc.RetryEvery > 0 && i%sc.RetryEvery == 0 {
			later = append(later, Message{Data: data, Attrs: map[string]string{"retry": "1"}})
		}
	}
	for i := range sc.Undecodable {
		bad := []string{`{"order_id": "broken`, `not json`, `{"quantity": 3}`}[i%3]
		first = append(first, Message{Data: []byte(bad), Attrs: map[string]string{"case": "undecodable"}})
	}
	for i := range first {
		first[i].LoseAck = sc.LostAckEvery > 0 && i%sc.LostAckEvery == 0 && first[i].Attrs == nil
	}
	return first, later
}

// Seen is a message as the fake saw it.
type Seen struct {
	Data        []byte
	Attrs       map[string]string
	PublishTime time.Time
	Deliveries  int
	Acks        int
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

// NewReport counts what the fake saw on the input, output and
// dead-letter topics, of a script of keys orders that lost acksLost acks.
func NewReport(keys, acksLost int, in, out, dead []Seen) Report {
	r := Report{Keys: keys, AcksLost: acksLost, DeadLettered: len(dead)}
	published := map[string]time.Time{} // order id -> first input publish time
	for _, m := range in {
		var o orders.Order
		if json.Unmarshal(m.Data, &o) == nil {
			if t, ok := published[o.OrderID]; !ok || m.PublishTime.Before(t) {
				published[o.OrderID] = m.PublishTime
			}
		}
		r.Published++
		r.Delivered += m.Deliveries
		if m.Deliveries > 1 {
			r.Redelivered++
		}
		if m.Attrs["case"] != "undecodable" {
			r.RowsDelivered += m.Deliveries
		} else {
			r.Undecodable++
		}
		if m.Acks > 0 {
			r.Acked++
		} else {
			r.Unacked++
		}
	}
	outKeys := map[string]bool{}
	var lat []time.Duration
	for _, m := range out {
		r.Emitted++
		var o orders.Order
		if json.Unmarshal(m.Data, &o) == nil {
			outKeys[o.OrderID] = true
			if t, ok := published[o.OrderID]; ok {
				lat = append(lat, m.PublishTime.Sub(t))
			}
		}
	}
	r.OutputKeys = len(outKeys)
	if len(lat) > 0 {
		slices.Sort(lat)
		r.LatencyP50, r.LatencyP99 = lat[len(lat)/2], lat[len(lat)*99/100]
	}
	return r
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

package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"cloud.google.com/go/pubsub/v2/pstest"

	"github.com/beamdedup/beamdedup/internal/pubsubdemo"
	"github.com/beamdedup/beamdedup/pipelines/orders"
)

// The streaming demo's script, played by demo (main.go), and its report.

// message is a message of the script, to publish.
type message struct {
	Data  []byte
	Attrs map[string]string
	// LoseAck: the ack of its first delivery is lost.
	LoseAck bool
}

// script is the messages of sc (with its defaults) published before the
// job starts, and those published while it runs (the publisher retries).
func script(sc pubsubdemo.Script) (first, later []message) {
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
		first = append(first, message{Data: data})
		if o.Price < 100 {
			first = append(first, message{Data: data}) // exact duplicate
		}
		if sc.RetryEvery > 0 && i%sc.RetryEvery == 0 {
			later = append(later, message{Data: data, Attrs: map[string]string{"retry": "1"}})
		}
	}
	for i := range sc.Undecodable {
		bad := []string{`{"order_id": "broken`, `not json`, `{"quantity": 3}`}[i%3]
		first = append(first, message{Data: []byte(bad), Attrs: map[string]string{"case": "undecodable"}})
	}
	for i := range first {
		first[i].LoseAck = sc.LostAckEvery > 0 && i%sc.LostAckEvery == 0 && first[i].Attrs == nil
	}
	return first, later
}

// report counts what the fake saw on the input, output and dead-letter
// topics, of a script of keys orders that lost acksLost acks.
func report(keys, acksLost int, in, out, dead []*pstest.Message) pubsubdemo.Report {
	r := pubsubdemo.Report{Keys: keys, AcksLost: acksLost, DeadLettered: len(dead)}
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
		if m.Attributes["case"] != "undecodable" {
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

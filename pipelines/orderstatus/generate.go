package orderstatus

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/beamdedup/beamdedup/pipelines/jsonl"
)

// The statuses an order goes through: created → paid → shipped, or
// cancelled after created or paid.
const (
	Created   = "created"
	Paid      = "paid"
	Shipped   = "shipped"
	Cancelled = "cancelled"
)

// GenConfig sizes the generated events.
type GenConfig struct {
	Orders  int    // orders, each with a created event
	Events  int    // events in all, resends included
	Resends int    // identical copies of an event, delivered again shortly after it
	Late    int    // status events delivered after their order's next status (out of order within an order)
	Seed    uint64 // same seed, same events in the same order
}

// DefaultGen is the shape of the keep-first/keep-last lesson's measurement
// (seed 003): 622 events for 240 orders, 41 of them identical resends, so
// 581 distinct status events. 12 events arrive after their order's next
// status. Orders are created every 15 seconds from GenStart and deliveries
// of different orders interleave out of event-time order.
var DefaultGen = GenConfig{Orders: 240, Events: 622, Resends: 41, Late: 12, Seed: 3}

// GenStart is the ts of the first order's created event.
var GenStart = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

// Lifecycles returns how many orders stop at created (n0), go one step
// further (n1: paid or cancelled) and two (n2: paid then shipped or
// cancelled) for cfg: about a tenth of the orders stay created, and
// n1 + 2·n2 = Events − Resends − Orders.
func (cfg GenConfig) Lifecycles() (n0, n1, n2 int, err error) {
	extra := cfg.Events - cfg.Resends - cfg.Orders
	lo, hi := max(0, cfg.Orders-extra), (2*cfg.Orders-extra)/2
	if cfg.Orders <= 0 || cfg.Resends < 0 || cfg.Late < 0 || extra < 0 || extra > 2*cfg.Orders || lo > hi {
		return 0, 0, 0, fmt.Errorf("orderstatus: %d events with %d resends cannot be %d orders of 1 to 3 status events each", cfg.Events, cfg.Resends, cfg.Orders)
	}
	n0 = min(max(cfg.Orders/10, lo), hi)
	n2 = extra - (cfg.Orders - n0)
	n1 = cfg.Orders - n0 - n2
	if cfg.Late > n1+n2 {
		return 0, 0, 0, fmt.Errorf("orderstatus: %d late events need as many orders with a second status; there are %d", cfg.Late, n1+n2)
	}
	return n0, n1, n2, nil
}

// Generate returns cfg.Events events in delivery order. Every order has a
// created event, then per its lifecycle paid, and shipped or cancelled,
// minutes apart in event time (ts). An event is delivered up to 30 s after
// its ts, a late one after its order's next event, and a resend up to 5
// minutes after the event it copies; events are listed in delivery order.
func Generate(cfg GenConfig) ([]Event, error) {
	n0, n1, n2, err := cfg.Lifecycles()
	if err != nil {
		return nil, err
	}
	r := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x5eed0003))
	steps := make([]int, 0, cfg.Orders) // extra statuses per order: n0 0s, n1 1s, n2 2s
	for extra, count := range []int{n0, n1, n2} {
		steps = append(steps, slices.Repeat([]int{extra}, count)...)
	}
	r.Shuffle(len(steps), func(i, j int) { steps[i], steps[j] = steps[j], steps[i] })

	type delivery struct {
		e  Event
		at time.Time
	}
	var out []delivery
	var lateable []int // indexes in out of events that have a next event in their order
	minutes := func(lo, hi int) time.Duration { return time.Duration(lo+r.IntN(hi-lo+1)) * time.Minute }
	for i, n := range steps {
		id := fmt.Sprintf("o%04d", i+1)
		ts := GenStart.Add(time.Duration(i) * 15 * time.Second)
		statuses := []string{Created}
		switch {
		case n == 1 && r.IntN(5) == 0:
			statuses = append(statuses, Cancelled)
		case n == 1:
			statuses = append(statuses, Paid)
		case n == 2 && r.IntN(7) == 0:
			statuses = append(statuses, Paid, Cancelled)
		case n == 2:
			statuses = append(statuses, Paid, Shipped)
		}
		for j, st := range statuses {
			if j > 0 {
				ts = ts.Add(minutes(1, 90))
				lateable = append(lateable, len(out)-1)
			}
			e := Event{OrderID: id, Status: st, TS: ts}
			out = append(out, delivery{e, ts.Add(time.Duration(r.IntN(30_001)) * time.Millisecond)})
		}
	}
	// Late: an event delivered after its order's next status.
	r.Shuffle(len(lateable), func(i, j int) { lateable[i], lateable[j] = lateable[j], lateable[i] })
	late := lateable[:cfg.Late]
	slices.SortFunc(late, func(a, b int) int { return b - a }) // a late event's next may be late too
	for _, k := range late {
		out[k].at = out[k+1].at.Add(time.Duration(1+r.IntN(60)) * time.Second)
	}
	// Resends: identical copies of distinct events.
	distinct := len(out)
	for _, k := range r.Perm(distinct)[:min(cfg.Resends, distinct)] {
		out = append(out, delivery{out[k].e, out[k].at.Add(time.Duration(1+r.IntN(300)) * time.Second)})
	}
	for len(out) < cfg.Events { // more resends than distinct events: copy again
		k := r.IntN(distinct)
		out = append(out, delivery{out[k].e, out[k].at.Add(time.Duration(1+r.IntN(300)) * time.Second)})
	}
	slices.SortStableFunc(out, func(a, b delivery) int { return cmp.Compare(a.at.UnixNano(), b.at.UnixNano()) })
	events := make([]Event, len(out))
	for i, d := range out {
		events[i] = d.e
	}
	return events, nil
}

// WriteSample writes Generate(cfg) to path as JSON Lines, creating its
// directory.
func WriteSample(path string, cfg GenConfig) error {
	events, err := Generate(cfg)
	if err != nil {
		return err
	}
	return jsonl.WriteFile(path, events)
}

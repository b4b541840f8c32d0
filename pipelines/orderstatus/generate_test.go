package orderstatus_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/pipelines/orderstatus"
)

// Seed 003's measurement: 622 events for 240 orders; keep-last in event
// time emitting a pair for every later row of a key gives 240 +I and
// 622 − 240 = 382 pairs. Here: 41 of the later rows are identical resends
// and 341 are status changes.
func TestGenerateDefaultIsSeed003sShape(t *testing.T) {
	events, err := orderstatus.Generate(orderstatus.DefaultGen)
	require.NoError(t, err)
	assert.Len(t, events, 622)

	type row struct{ id, status string }
	orders := map[string]bool{}
	distinct := map[row]bool{}
	for _, e := range events {
		orders[e.OrderID] = true
		distinct[row{e.OrderID, e.Status}] = true
	}
	assert.Len(t, orders, 240)
	assert.Len(t, distinct, 581, "622 events less 41 identical resends")
	assert.Equal(t, 382, len(events)-len(orders), "later rows of a key: Flink's -U/+U pairs")
}

func TestGenerateFollowsTheLifecycleWithResendsAndLateDeliveries(t *testing.T) {
	for _, cfg := range []orderstatus.GenConfig{
		orderstatus.DefaultGen,
		{Orders: 50, Events: 120, Resends: 10, Late: 5, Seed: 1},
		{Orders: 1, Events: 1, Seed: 2},
		{Orders: 10, Events: 40, Resends: 20, Seed: 4},
	} {
		events, err := orderstatus.Generate(cfg)
		require.NoError(t, err)
		again, _ := orderstatus.Generate(cfg)
		assert.Equal(t, events, again, "same seed, same events")
		require.Len(t, events, cfg.Events)

		byOrder := map[string][]orderstatus.Event{}
		copies := map[orderstatus.Event]int{}
		for _, e := range events {
			assert.Empty(t, e.Op)
			if copies[e]++; copies[e] == 1 {
				byOrder[e.OrderID] = append(byOrder[e.OrderID], e)
			}
		}
		assert.Len(t, byOrder, cfg.Orders)
		resends, late := 0, 0
		for _, n := range copies {
			resends += n - 1
		}
		for id, es := range byOrder {
			// Delivery order of the distinct events; the lifecycle is the
			// event-time order.
			seq := map[string]int{orderstatus.Created: 0, orderstatus.Paid: 1, orderstatus.Shipped: 2, orderstatus.Cancelled: 2}
			for i := 1; i < len(es); i++ {
				if es[i].TS.Before(es[i-1].TS) {
					late++
				}
			}
			created := 0
			for _, e := range es {
				if e.Status == orderstatus.Created {
					created++
				}
				for _, f := range es {
					if seq[e.Status] < seq[f.Status] || (e.Status == orderstatus.Created && f.Status == orderstatus.Cancelled) {
						assert.True(t, e.TS.Before(f.TS), "%s: %s before %s in event time", id, e.Status, f.Status)
					}
				}
			}
			assert.Equal(t, 1, created, "%s has one created event", id)
		}
		assert.Equal(t, cfg.Resends, resends)
		assert.Equal(t, cfg.Late, late, "deliveries behind an event of their order that is later in event time")
	}
}

func TestGenerateRejectsSizesNoLifecycleFits(t *testing.T) {
	for _, cfg := range []orderstatus.GenConfig{
		{Orders: 10, Events: 5},           // fewer events than orders
		{Orders: 10, Events: 31},          // more than 3 statuses an order
		{Orders: 10, Events: 10, Late: 1}, // no order with a second status
		{Orders: 0, Events: 0},
	} {
		_, err := orderstatus.Generate(cfg)
		assert.Error(t, err, "%+v", cfg)
	}
}

package pubsubio

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	pubsub "cloud.google.com/go/pubsub/v2/apiv1"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"

	"github.com/beamdedup/beamdedup/internal/unbounded"
)

// A run is one Read of one job as this process sees it: the messages its
// readers emitted here and nobody has acked yet (held), each under its
// newest ack id, their leases extended until Ack releases them. A
// redelivery of a held message is absorbed (see the package doc). A
// message acked in another process is released here only by holdLimit.
type run struct {
	id           string
	subscription string
	sub          *pubsub.SubscriptionAdminClient
	deadline     time.Duration
	lease        bool

	mu         sync.Mutex
	held       map[string]holding // by message id
	active     time.Time          // last hold or release
	leasing    bool               // the lease goroutine runs
	extensions atomic.Int64       // lease extension requests, for the readers' counter
}

type holding struct {
	ackID string
	since time.Time
}

var (
	runsMu sync.Mutex
	runs   = map[string]*run{}
)

// leaseIdle is how long a run may hold messages without any hold or
// release before its leases are given up: its job is gone or stuck.
func (r *run) leaseIdle() time.Duration { return max(2*time.Minute, 3*r.deadline) }

// holdLimit is how long one message is held at most: past it, it was
// acked in another process, or its ack was lost and it must come back.
func (r *run) holdLimit() time.Duration { return max(10*time.Minute, 10*r.deadline) }

// runFor returns the run of fn in this process, creating it on first use.
// Closing the Read's Control ends the run and hands back the messages it
// still holds.
func runFor(ctx context.Context, fn *readFn) *run {
	runsMu.Lock()
	defer runsMu.Unlock()
	id := fn.Reading.RunID
	if r, ok := runs[id]; ok {
		return r
	}
	r := &run{id: id, subscription: fn.Subscription, sub: fn.sub, deadline: fn.ackDeadline(),
		lease: !fn.DisableLease, held: map[string]holding{}, active: time.Now()}
	runs[id] = r
	unbounded.LookupControl(ctx, fn.Reading.Control, fn.Subscription, &fn.controlWarned).OnClose(func(ctx context.Context) error {
		closeRun(ctx, id, true)
		return nil
	})
	return r
}

// hold registers a delivery. It reports false for a redelivery of a held
// message: only its ack id is kept, and the caller must not emit it.
func (r *run) hold(ctx context.Context, msgID, ackID string) bool {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	h, dup := r.held[msgID]
	if !dup {
		h.since = now
	}
	h.ackID = ackID
	r.held[msgID] = h
	r.active = now
	if r.lease && !r.leasing {
		r.leasing = true
		go r.extendUntilReleased(context.WithoutCancel(ctx))
	}
	return !dup
}

// extendUntilReleased extends the held messages' leases every third of
// the deadline until none is held, the run is closed or idle for
// leaseIdle; it ends the holds older than holdLimit.
func (r *run) extendUntilReleased(ctx context.Context) {
	t := time.NewTicker(max(r.deadline/3, 100*time.Millisecond))
	defer t.Stop()
	warned := false
	for range t.C {
		r.mu.Lock()
		if len(r.held) == 0 || r.sub == nil {
			r.leasing = false
			r.mu.Unlock()
			return
		}
		now := time.Now()
		if idle := now.Sub(r.active); idle >= r.leaseIdle() {
			n := len(r.held)
			r.leasing = false
			r.mu.Unlock()
			log.Warnf(ctx, "pubsubio: %d messages of %s held for %v without any of them acked; no longer extending their leases (Pub/Sub redelivers them after %v)",
				n, r.subscription, idle.Round(time.Second), r.deadline)
			closeRun(ctx, r.id, false)
			return
		}
		ids := make([]string, 0, len(r.held))
		expired := 0
		for m, h := range r.held {
			if now.Sub(h.since) >= r.holdLimit() {
				delete(r.held, m)
				expired++
				continue
			}
			ids = append(ids, h.ackID)
		}
		r.mu.Unlock()
		if expired > 0 {
			log.Warnf(ctx, "pubsubio: %d messages of %s held for %v and not acked in this process; no longer holding them (Pub/Sub redelivers them after %v)",
				expired, r.subscription, r.holdLimit(), r.deadline)
		}
		if err := modifyDeadline(ctx, r.sub, r.subscription, ids, r.deadline); err != nil && !warned {
			warned = true // once per run: the loop retries every tick
			warnModify(ctx, err)
		}
		r.extensions.Add(int64((len(ids) + ackChunk - 1) / ackChunk))
	}
}

// closeRun unregisters a run; with nack, it hands back at once the
// messages it still holds.
func closeRun(ctx context.Context, id string, nack bool) {
	runsMu.Lock()
	r, ok := runs[id]
	delete(runs, id)
	runsMu.Unlock()
	if !ok {
		return
	}
	r.mu.Lock()
	ids := make([]string, 0, len(r.held))
	for _, h := range r.held {
		ids = append(ids, h.ackID)
	}
	r.held = map[string]holding{}
	r.mu.Unlock()
	if nack && r.sub != nil && len(ids) > 0 {
		warnModify(ctx, modifyDeadline(ctx, r.sub, r.subscription, ids, 0))
	}
}

// releaseHeld releases the messages msgIDs in every run of this process
// that reads subscription, and returns the newest ack id held for each
// ("" when none held it).
func releaseHeld(subscription string, msgIDs []string) (newest []string) {
	newest = make([]string, len(msgIDs))
	runsMu.Lock()
	defer runsMu.Unlock()
	for _, r := range runs {
		if r.subscription != subscription {
			continue
		}
		n := 0
		r.mu.Lock()
		for i, m := range msgIDs {
			if h, ok := r.held[m]; ok {
				delete(r.held, m)
				newest[i] = h.ackID
				n++
			}
		}
		if n > 0 {
			r.active = time.Now()
		}
		r.mu.Unlock()
	}
	return newest
}

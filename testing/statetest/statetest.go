// Package statetest is a state backend for tests that drive a stateful
// DoFn's step without a runner: a bag per key, each key's requests logged
// in the order they were made, and what a runner would not see from a
// correct step caught (two requests of a key in flight at once, a request
// between bundles). Its requests may take random few microseconds
// (Jitter), so that requests kept in flight together finish out of order,
// or a fixed round trip (RTT), as a runner's do.
package statetest

import (
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"
)

// Requests follows a backend's requests.
type Requests struct {
	mu sync.Mutex // also guards the backend's cells (Do runs f under it)
	// Jitter makes one request in four wait up to 30 µs first.
	Jitter bool
	// RTT, when set, makes each request wait for a round trip, outside
	// the lock.
	RTT *RoundTrips
	// Log is each key's requests, in the order they were made.
	Log map[string][]string
	// Overlaps are the requests made while another of their key was in
	// flight; Late counts those made between bundles.
	Overlaps []string
	Late     int

	inFlight map[string]int
	ended    bool
}

// NewRequests follows requests, with Jitter as given.
func NewRequests(jitter bool) *Requests {
	return &Requests{Jitter: jitter, Log: map[string][]string{}, inFlight: map[string]int{}}
}

// Do makes the request what of key: f, under the lock.
func (m *Requests) Do(key, what string, f func()) {
	m.mu.Lock()
	m.inFlight[key]++
	if m.inFlight[key] > 1 {
		m.Overlaps = append(m.Overlaps, key+": "+what)
	}
	if m.ended {
		m.Late++
	}
	m.mu.Unlock()
	if m.Jitter && rand.IntN(4) == 0 {
		time.Sleep(time.Duration(rand.IntN(30)) * time.Microsecond)
	}
	if m.RTT != nil {
		m.RTT.wait()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	f()
	m.Log[key] = append(m.Log[key], what)
	m.inFlight[key]--
}

// Bundle marks a bundle started (or, with false, ended).
func (m *Requests) Bundle(active bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ended = !active
}

// Bags is a backend of a bag per key, its requests followed, with Jitter.
type Bags struct {
	*Requests
	Cells map[string][]any
	// Before, when set, runs first in each request ("get", "append",
	// "clear") of key, on the goroutine that makes it: a test's failure,
	// panic or hang.
	Before func(what, key string) error
}

// NewBags is an empty backend, with Jitter.
func NewBags() *Bags {
	return &Bags{Requests: NewRequests(true), Cells: map[string][]any{}}
}

func (b *Bags) before(what, key string) error {
	if b.Before == nil {
		return nil
	}
	return b.Before(what, key)
}

// Provider is the state provider of an element of Key on Bags: its key's
// bag. A provider per element, as Beam's harness hands a DoFn.
type Provider struct {
	state.Provider // the calls a bag makes are overridden
	Bags           *Bags
	Key            string
}

func (p *Provider) ReadBagState(string) ([]any, []state.Transaction, error) {
	if err := p.Bags.before("get", p.Key); err != nil {
		return nil, nil, err
	}
	var out []any
	p.Bags.Do(p.Key, "get", func() { out = slices.Clone(p.Bags.Cells[p.Key]) })
	return out, nil, nil
}

func (p *Provider) WriteBagState(t state.Transaction) error {
	if err := p.Bags.before("append", p.Key); err != nil {
		return err
	}
	p.Bags.Do(p.Key, "append", func() { p.Bags.Cells[p.Key] = append(p.Bags.Cells[p.Key], t.Val) })
	return nil
}

func (p *Provider) ClearBagState(state.Transaction) error {
	if err := p.Bags.before("clear", p.Key); err != nil {
		return err
	}
	p.Bags.Do(p.Key, "clear", func() { p.Bags.Cells[p.Key] = nil })
	return nil
}

// RoundTrips answers each request a fixed time after it was made, as a
// server would, however many are in flight: a goroutine spins on the queue
// (a timer's granularity is about a millisecond on this machine, far above
// a state request's round trip).
type RoundTrips struct {
	d  time.Duration
	in chan *roundTrip
}

type roundTrip struct {
	due  time.Time
	done chan struct{}
}

// NewRoundTrips answers round trips of d until stop is called.
func NewRoundTrips(d time.Duration) (r *RoundTrips, stop func()) {
	r = &RoundTrips{d: d, in: make(chan *roundTrip, 1024)}
	quit := make(chan struct{})
	go func() {
		var queue []*roundTrip // in order of due: each waits d
		for {
			if len(queue) == 0 {
				select {
				case rt := <-r.in:
					queue = append(queue, rt)
				case <-quit:
					return
				}
			}
			for more := true; more; {
				select {
				case rt := <-r.in:
					queue = append(queue, rt)
				default:
					more = false
				}
			}
			now := time.Now()
			for len(queue) > 0 && !now.Before(queue[0].due) {
				close(queue[0].done)
				queue = queue[1:]
			}
		}
	}()
	return r, func() { close(quit) }
}

// wait makes a round trip.
func (r *RoundTrips) wait() {
	rt := &roundTrip{due: time.Now().Add(r.d), done: make(chan struct{})}
	r.in <- rt
	<-rt.done
}

package step

import (
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"
)

// The requests a step keeps in flight (overlap.go): issued apart from the
// DoFn's goroutine, chained per key, bounded in number, and waited for with
// a deadline.

// maxInFlight bounds the requests a step has issued and not yet seen
// answered; the DoFn waits for a slot beyond it.
const maxInFlight = 128

// requestDeadline is the longest a step waits for a state request's answer
// (or for a slot to issue one) before it fails the bundle: a runner that
// never answers a request would otherwise hang the bundle in FinishBundle,
// far from its cause. Runners answer in micro- to milliseconds; a request
// minutes old is lost.
const requestDeadline = 5 * time.Minute

// requests issues a step's state requests apart from the DoFn's goroutine
// and tracks them until they are answered. Every wait of the DoFn's
// goroutine on them has a deadline; a request's goroutine recovers a panic
// (the stores' decoding runs there) into the request's failure, with its
// stack, so that it fails the bundle rather than the worker.
type requests struct {
	step     string         // the step's name, for errors
	deadline time.Duration  // requestDeadline, or a test's
	last     map[string]*op // each key's latest request, by the cache's id
	slots    chan struct{}
	timer    *time.Timer // the DoFn goroutine's, for its waits
	// stuck is set once a wait ran out: a request may never be answered,
	// so none is waited for again and the step makes new requests.
	stuck bool

	mu   sync.Mutex
	err  error                  // the first failure
	held map[state.Provider]int // providers with requests in flight
}

// op is a request (or a key's requests of one write) in flight.
type op struct {
	done chan struct{}
	err  error
	what string // "read" or "write"
	key  string // the cache's id of the key
}

func newRequests(step string) *requests {
	return &requests{step: step, deadline: requestDeadline, last: make(map[string]*op), slots: make(chan struct{}, maxInFlight),
		held: make(map[state.Provider]int)}
}

// issue makes f's requests through sp on another goroutine once the key's
// earlier ones are answered, and returns at once (or once a slot is free).
// what names them in errors.
func (r *requests) issue(sp state.Provider, id, what string, f func() error) (*op, error) {
	if err := r.acquire(); err != nil {
		return nil, err
	}
	o := &op{done: make(chan struct{}), what: what, key: id}
	prev := r.last[id]
	r.last[id] = o
	r.mu.Lock()
	r.held[sp]++
	r.mu.Unlock()
	go r.run(o, prev, sp, f)
	return o, nil
}

// run makes o's requests after prev, the key's request before them.
func (r *requests) run(o, prev *op, sp state.Provider, f func() error) {
	defer func() {
		if p := recover(); p != nil {
			o.err = fmt.Errorf("dedup: the stateful step %s: the %s of key %s panicked: %v\n%s", r.step, o.what, keyName(o.key), p, debug.Stack())
		}
		r.mu.Lock()
		if o.err != nil && r.err == nil {
			r.err = o.err
		}
		if r.held[sp]--; r.held[sp] <= 0 {
			delete(r.held, sp)
		}
		r.mu.Unlock()
		<-r.slots
		close(o.done)
	}()
	if prev != nil {
		<-prev.done
		o.err = prev.err // a key's requests after a failed one are not made
	}
	if o.err == nil {
		o.err = f()
	}
}

// acquire takes a slot for a request, waiting for one at most the
// deadline.
func (r *requests) acquire() error {
	select {
	case r.slots <- struct{}{}:
		return nil
	default:
	}
	select {
	case r.slots <- struct{}{}:
		r.timer.Stop()
		return nil
	case <-r.arm():
		return r.timedOut("a free slot for a request", r.unanswered())
	}
}

// arm starts the deadline of one wait.
func (r *requests) arm() <-chan time.Time {
	if r.timer == nil {
		r.timer = time.NewTimer(r.deadline)
	} else {
		r.timer.Reset(r.deadline)
	}
	return r.timer.C
}

// await waits until o is answered, at most the deadline, and returns its
// failure.
func (r *requests) await(o *op) error {
	select {
	case <-o.done:
		return o.err
	default:
	}
	select {
	case <-o.done:
		r.timer.Stop()
		return o.err
	case <-r.arm():
		return r.timedOut("the "+o.what+" of key "+keyName(o.key), o)
	}
}

// timedOut is the failure of a wait for what that ran out, o the request
// not answered (nil: none found).
func (r *requests) timedOut(what string, o *op) error {
	r.stuck = true
	unanswered := ""
	if o != nil {
		unanswered = fmt.Sprintf(" (the %s of key %s is not answered)", o.what, keyName(o.key))
	}
	return fmt.Errorf("dedup: the stateful step %s waited %v for %s%s: the runner did not answer a state request; the bundle fails so that the runner retries it",
		r.step, r.deadline, what, unanswered)
}

// unanswered is a request in flight not answered yet, or nil.
func (r *requests) unanswered() *op {
	for _, o := range r.last {
		select {
		case <-o.done:
		default:
			return o
		}
	}
	return nil
}

// keyName is a key's id as errors show it: quoted, and cut at 64 bytes.
func keyName(id string) string {
	if len(id) > 64 {
		return strconv.Quote(id[:64]) + "..."
	}
	return strconv.Quote(id)
}

// failed returns the first failure so far.
func (r *requests) failed() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// holds reports whether a request in flight holds sp.
func (r *requests) holds(sp state.Provider) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held[sp] > 0
}

// settle waits until the key's requests are answered.
func (r *requests) settle(id []byte) error {
	o, ok := r.last[string(id)]
	if !ok {
		return nil
	}
	if err := r.await(o); err != nil {
		return err
	}
	delete(r.last, string(id))
	return nil
}

// wait waits until every request issued is answered, at most the deadline
// for each, and returns the first failure. Each request in flight holds a
// slot, so holding them all means none is.
func (r *requests) wait() error {
	var late error
	for taken := 0; taken < cap(r.slots) && !r.stuck; taken++ {
		select {
		case r.slots <- struct{}{}:
			continue
		default:
		}
		select {
		case r.slots <- struct{}{}:
			r.timer.Stop()
		case <-r.arm():
			late = r.timedOut("every request of the bundle to be answered", r.unanswered())
		}
	}
	if !r.stuck {
		for range cap(r.slots) {
			<-r.slots
		}
	}
	clear(r.last)
	r.mu.Lock()
	defer r.mu.Unlock()
	err := errors.Join(r.err, late)
	r.err = nil
	return err
}

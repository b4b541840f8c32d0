package pubsubio

import (
	"reflect"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
)

func init() {
	beam.RegisterType(reflect.TypeOf((*restriction)(nil)).Elem())
}

// restriction is the state a reader carries from a bundle to the next.
type restriction struct {
	// LastActivityMs is when the reader last received a message (Unix ms),
	// for IdleStop; 0 means "not started".
	LastActivityMs int64
}

// tracker claims ack ids. It is unbounded: only a checkpoint (a split at
// fraction 0, by the SDK after a ResumeProcessingIn or by the runner) or a
// stop ends it; after that TryClaim fails.
type tracker struct {
	mu           sync.Mutex
	rest         restriction
	claimed      int
	lastActivity int64
	done         bool
}

func newTracker(r restriction, now time.Time) *tracker {
	t := &tracker{rest: r, lastActivity: r.LastActivityMs}
	if t.lastActivity == 0 {
		t.lastActivity = now.UnixMilli()
	}
	return t
}

// TryClaim claims an ack id (a string).
func (t *tracker) TryClaim(any) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done {
		return false
	}
	t.claimed++
	t.lastActivity = time.Now().UnixMilli()
	return true
}

func (t *tracker) GetError() error { return nil }

// TrySplit supports only checkpoints (fraction 0): the primary is the
// finished work of this bundle, the residual the reader's next bundle.
// Other fractions are declined: a reader's work cannot be split, only more
// readers added.
func (t *tracker) TrySplit(fraction float64) (primary, residual any, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done || fraction > 0 {
		return t.rest, nil, nil
	}
	t.done = true
	return restriction{}, restriction{LastActivityMs: t.lastActivity}, nil
}

func (t *tracker) GetProgress() (done, remaining float64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return float64(t.claimed), 1
}

func (t *tracker) IsDone() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.done
}

func (t *tracker) IsBounded() bool { return false }

func (t *tracker) GetRestriction() any {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rest
}

// stop ends the restriction without a residual (idle stop, stop request).
func (t *tracker) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.done = true
}

func (t *tracker) lastActivityTime() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return time.UnixMilli(t.lastActivity)
}

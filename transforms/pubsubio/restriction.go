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
	LastActivityMs int64 // when the reader last received a message, for IdleStop; 0: not started
}

// tracker claims ack ids until a checkpoint (a split at fraction 0) or a
// stop ends it.
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

// TrySplit declines all but checkpoints: a reader's work cannot be split.
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

// stop ends the restriction without a residual.
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

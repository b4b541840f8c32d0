package pubsubio

import (
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
)

func init() {
	beam.RegisterType(reflect.TypeOf((*Restriction)(nil)).Elem())
}

// Restriction is the state one reader carries from a bundle to the next.
// The runner persists it as part of the bundle's result and starts it only
// after committing that bundle, which is what makes acking it safe.
type Restriction struct {
	// AckIDs are the messages the previous bundle claimed and emitted. The
	// bundle is committed by the time this restriction runs, so they are
	// acked first.
	AckIDs []string
	// LastActivityMs is when the reader last received a message (Unix ms),
	// for IdleStop; 0 means "not started".
	LastActivityMs int64
}

// tracker claims ack ids. It is unbounded: only a checkpoint (a split at
// fraction 0, by the SDK after a ResumeProcessingIn or by the runner) or stop
// ends it. After that, TryClaim fails and the residual carries every id
// claimed so far.
type tracker struct {
	mu           sync.Mutex
	rest         Restriction
	claimed      []string
	lastActivity int64
	done         bool
}

func newTracker(r Restriction, now time.Time) *tracker {
	t := &tracker{rest: r, lastActivity: r.LastActivityMs}
	if t.lastActivity == 0 {
		t.lastActivity = now.UnixMilli()
	}
	return t
}

// TryClaim claims an ack id (a string).
func (t *tracker) TryClaim(pos any) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done {
		return false
	}
	t.claimed = append(t.claimed, pos.(string))
	t.lastActivity = time.Now().UnixMilli()
	return true
}

func (t *tracker) GetError() error { return nil }

// TrySplit supports only checkpoints (fraction 0): the primary becomes the
// finished work of this bundle and the residual owes the acks of everything
// it claimed. Other fractions are declined: a reader's work cannot be split,
// only more readers added.
func (t *tracker) TrySplit(fraction float64) (primary, residual any, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done || fraction > 0 {
		return t.rest, nil, nil
	}
	t.done = true
	res := Restriction{AckIDs: append([]string{}, t.claimed...), LastActivityMs: t.lastActivity}
	return Restriction{AckIDs: []string{}}, res, nil
}

func (t *tracker) GetProgress() (done, remaining float64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return float64(len(t.claimed)), 1
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

// stop ends the restriction without a residual (idle stop).
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

// WatermarkEstimator is the source's manual watermark estimator. Its state
// is the watermark in Unix milliseconds; it only moves forward.
type WatermarkEstimator struct {
	ms atomic.Int64
}

// CurrentWatermark reports the output watermark of the reader.
func (e *WatermarkEstimator) CurrentWatermark() time.Time {
	return time.UnixMilli(e.ms.Load())
}

// UpdateWatermark moves the watermark to t if t is later.
func (e *WatermarkEstimator) UpdateWatermark(t time.Time) {
	ms := t.UnixMilli()
	for {
		cur := e.ms.Load()
		if ms <= cur || e.ms.CompareAndSwap(cur, ms) {
			return
		}
	}
}

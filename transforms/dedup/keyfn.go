package dedup

import (
	"context"
	"reflect"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"

	"github.com/beamdedup/beamdedup/coders/keycoder"
	"github.com/beamdedup/beamdedup/transforms/deadletter"
	"github.com/beamdedup/beamdedup/transforms/dedup/core"
	"github.com/beamdedup/beamdedup/transforms/rowkind"
)

// rowChecks validates a row's time and kind columns; shared by both keying
// DoFns. Rows that fail go to the dead-letter output.
type rowChecks struct {
	TimeCol string
	KindCol string
	SeqCol  string
	tf      *timeField
	kf      *kindField
	sf      *seqField
	seq     []byte // scratch for the NULL check
}

func (c *rowChecks) setup(t reflect.Type) error {
	if c.TimeCol != "" {
		tf, err := newTimeField(t, c.TimeCol)
		if err != nil {
			return err
		}
		c.tf = &tf
	}
	if c.KindCol != "" {
		kf, err := newKindField(t, c.KindCol)
		if err != nil {
			return err
		}
		c.kf = &kf
	}
	var err error
	c.sf, err = optionalSeqField(t, c.SeqCol)
	return err
}

// check returns the row's event time (ts unless OnTime is set) and kind
// (Insert unless Changelog is set), or a reason to reject it.
func (c *rowChecks) check(ts beam.EventTime, v reflect.Value) (beam.EventTime, rowkind.Kind, string) {
	if c.tf != nil {
		ms, reason := c.tf.millis(v)
		if reason != "" {
			return 0, 0, reason
		}
		ts = mtime.Time(ms)
	}
	kind := rowkind.Insert
	if c.kf != nil {
		var reason string
		if kind, reason = c.kf.kind(v); reason != "" {
			return 0, 0, reason
		}
	}
	if c.sf != nil {
		var reason string
		if c.seq, reason = c.sf.appendTo(c.seq[:0], v); reason != "" {
			return 0, 0, reason
		}
	}
	return ts, kind, ""
}

// keyRowsFn keys each row by its encoded PARTITION BY columns and sets its
// timestamp from the OnTime column.
//
// With MiniBatch (no event-time retention) it also drops later +I/+U rows of
// a key already passed on in the same bundle, as Flink's mini-batch
// deduplication does: they can only be duplicates (in event-time mode, only
// rows no earlier than the smallest event time passed on, which can only be
// duplicates or late), and dropping them here spares the shuffle and a state
// read each. Memory is bounded (the
// set is cleared per bundle and at miniBatchMaxKeys). With a StateTTL a row
// is dropped only if it arrived less than TTL/core.RefreshFraction after the
// key's first row in the bundle, so no row that could start a new period, or
// refresh retention by more than the documented precision, is dropped.
type keyRowsFn struct {
	RowType    beam.EncodedType
	Columns    []string
	Checks     rowChecks
	UID        string
	MiniBatch  bool
	EventTime  bool
	StateTTLMs int64
	Clock      string

	enc  *keycoder.Encoder
	now  func(time.Time) time.Time
	seen map[string]passed // key -> the row of it passed on in this bundle
}

// passed is what the mini-batch remembers of a key's row passed on.
type passed struct {
	now int64 // processing time of the key's first row passed on
	ts  int64 // smallest event time passed on (event-time mode)
}

// miniBatchMaxKeys bounds the per-bundle key set.
const miniBatchMaxKeys = 100_000

// StartBundle takes the emitters only because Beam requires the emitters of
// ProcessElement there too.
func (f *keyRowsFn) StartBundle(_ context.Context, _ func(beam.EventTime, []byte, beam.T), _ func(deadletter.DeadLetter)) {
	clear(f.seen)
}

// recentInBundle reports whether a +I/+U of key passed in this bundle
// recently enough that the key is certainly seen now.
func (f *keyRowsFn) recentInBundle(key []byte, ts beam.EventTime) bool {
	p, ok := f.seen[string(key)]
	if !ok {
		return false
	}
	return core.Config{StateTTL: f.StateTTLMs}.SameMiniBatchGroup(p.now, f.now(ts.ToTime()).UnixMilli())
}

// seenInBundle reports whether a row of key was already passed on in this
// bundle recently enough that this one can only be dropped, and records it.
// In event-time mode that needs an event time no earlier than the smallest
// passed on: an earlier row may still become the candidate, so it passes
// (ties: the first arrival stays, as in the stateful step).
func (f *keyRowsFn) seenInBundle(key []byte, ts beam.EventTime) bool {
	now := f.now(ts.ToTime()).UnixMilli()
	p, ok := f.seen[string(key)]
	if ok && (core.Config{StateTTL: f.StateTTLMs}).SameMiniBatchGroup(p.now, now) {
		if !f.EventTime || int64(ts) >= p.ts {
			return true
		}
		p.ts = int64(ts)
		f.seen[string(key)] = p
		return false
	}
	if len(f.seen) >= miniBatchMaxKeys {
		clear(f.seen)
	}
	f.seen[string(key)] = passed{now: now, ts: int64(ts)}
	return false
}

func (f *keyRowsFn) Setup() error {
	enc, err := keycoder.New(f.RowType.T, f.Columns)
	if err != nil {
		return err
	}
	f.enc = enc
	f.seen = make(map[string]passed)
	if f.now, err = resolveClock(f.Clock); err != nil {
		return err
	}
	return f.Checks.setup(f.RowType.T)
}

// admit counts a row in, validates it (a rejected row goes to dead with its
// reason) and returns its key (appended to dst), event time and kind.
func (f *keyRowsFn) admit(ctx context.Context, dst []byte, ts beam.EventTime, row any, dead func(deadletter.DeadLetter)) ([]byte, beam.EventTime, rowkind.Kind, bool) {
	cRowsIn.Inc(ctx, 1)
	v := reflect.ValueOf(row)
	ts, kind, reason := f.Checks.check(ts, v)
	if reason != "" {
		cDeadLettered.Inc(ctx, 1)
		dead(deadletter.New(f.UID, row, reason))
		return nil, 0, 0, false
	}
	return f.enc.Append(dst, v), ts, kind, true
}

func (f *keyRowsFn) ProcessElement(ctx context.Context, ts beam.EventTime, row beam.T, emit func(beam.EventTime, []byte, beam.T), dead func(deadletter.DeadLetter)) {
	// A fresh key slice per row: the emitted key may outlive this call.
	key, ts, kind, ok := f.admit(ctx, nil, ts, row, dead)
	if !ok {
		return
	}
	if f.MiniBatch {
		if kind.IsRetraction() {
			// A -U/-D of a key whose +I/+U already passed in this bundle can
			// only be swallowed: that row either was emitted or found the
			// key seen. One of an unseen key must reach the state.
			if f.recentInBundle(key, ts) {
				cMiniBatchDropped.Inc(ctx, 1)
				cOutcome[core.Swallow].Inc(ctx, 1)
				return
			}
		} else if f.seenInBundle(key, ts) {
			cMiniBatchDropped.Inc(ctx, 1)
			cOutcome[core.DropDuplicate].Inc(ctx, 1)
			return
		}
	}
	emit(ts, key, row)
}

// keyPairsFn prepares KeepFirstPerKey input: canonical float keys (so -0
// and 0, and all NaNs, are one key) and timestamps from the OnTime column.
type keyPairsFn struct {
	ValueType beam.EncodedType
	KeyKind   int // reflect.Kind of the key
	Checks    rowChecks
	UID       string
}

func (f *keyPairsFn) Setup() error {
	if f.Checks.TimeCol == "" && f.Checks.KindCol == "" && f.Checks.SeqCol == "" {
		return nil
	}
	return f.Checks.setup(f.ValueType.T)
}

func (f *keyPairsFn) ProcessElement(ctx context.Context, ts beam.EventTime, k beam.U, v beam.V, emit func(beam.EventTime, beam.U, beam.V), dead func(deadletter.DeadLetter)) {
	cRowsIn.Inc(ctx, 1)
	if f.Checks.tf != nil || f.Checks.kf != nil || f.Checks.sf != nil {
		var reason string
		if ts, _, reason = f.Checks.check(ts, reflect.ValueOf(v)); reason != "" {
			cDeadLettered.Inc(ctx, 1)
			dead(deadletter.New(f.UID, map[string]any{"key": k, "value": v}, reason))
			return
		}
	}
	switch reflect.Kind(f.KeyKind) {
	case reflect.Float64:
		rv := reflect.ValueOf(k)
		c := reflect.New(rv.Type()).Elem()
		c.SetFloat(keycoder.CanonicalFloat64(rv.Float()))
		k = c.Interface()
	case reflect.Float32:
		rv := reflect.ValueOf(k)
		c := reflect.New(rv.Type()).Elem()
		c.SetFloat(float64(keycoder.CanonicalFloat32(float32(rv.Float()))))
		k = c.Interface()
	}
	emit(ts, k, v)
}

package dedup

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/timers"

	"github.com/beamdedup/beamdedup/coders/statecoder"
	"github.com/beamdedup/beamdedup/transforms/dedup/core"
)

// The DoFns below are thin adapters around core.Config: read the key's
// state, ask the core, write back, set the one timer, emit. There is one
// DoFn type per timer family, because Beam Go 2.77 hangs any DoFn that
// declares two timer fields (notes/beam-defects.md), so each configuration
// gets the variant with only the family it needs.

// Names of the state and timers. They are part of the persisted state's
// identity: never rename them.
const (
	stateID     = "keepfirst"
	eventFamily = "keepfirst-event"
	procFamily  = "keepfirst-cleanup"
)

// params is the serialized configuration shared by the DoFn variants.
type params struct {
	EventTime  bool
	StateTTLMs int64
	EventTTLMs int64
	Reset      bool
	Cleanup    bool
	ValueType  beam.EncodedType
	KindCol    string
	Clock      string
}

// adapter is the per-instance runtime of a DoFn variant.
type adapter struct {
	cfg   core.Config
	now   func(time.Time) time.Time
	kf    *kindField
	enc   beam.ElementEncoder
	dec   beam.ElementDecoder
	buf   bytes.Buffer
	st    core.State
	sbuf  []byte
	ready bool
}

func (a *adapter) setup(p *params) error {
	if a.ready {
		return nil
	}
	a.cfg = core.Config{EventTime: p.EventTime, StateTTL: p.StateTTLMs, EventTTL: p.EventTTLMs, ResetOnDuplicate: p.Reset, CleanupTimers: p.Cleanup}
	var err error
	if a.now, err = resolveClock(p.Clock); err != nil {
		return err
	}
	if a.kf, err = optionalKindField(p.ValueType.T, p.KindCol); err != nil {
		return err
	}
	if p.EventTime {
		a.enc = beam.NewElementEncoder(p.ValueType.T)
		a.dec = beam.NewElementDecoder(p.ValueType.T)
	}
	a.ready = true
	return nil
}

// setTimer sets the DoFn's one timer; hold reports whether it holds the
// output watermark at its firing time (finalization) or holds nothing
// (cleanup). timers' option type is unexported, hence the bool.
type setTimer func(at time.Time, hold bool)

func eventSetter(t timers.EventTime, tp timers.Provider) setTimer {
	return func(at time.Time, hold bool) {
		if hold {
			t.Set(tp, at, timers.WithOutputTimestamp(at))
		} else {
			t.Set(tp, at, timers.WithNoOutputTimestamp())
		}
	}
}

func procSetter(t timers.ProcessingTime, tp timers.Provider) setTimer {
	return func(at time.Time, _ bool) { t.Set(tp, at, timers.WithNoOutputTimestamp()) }
}

func (a *adapter) read(ctx context.Context, sp state.Provider, sv *state.Value[[]byte]) error {
	cStateReads.Inc(ctx, 1)
	b, ok, err := sv.Read(sp)
	if err != nil {
		return fmt.Errorf("dedup: reading state: %w", err)
	}
	if !ok {
		b = nil
	}
	return statecoder.Decode(b, &a.st)
}

func (a *adapter) write(ctx context.Context, sp state.Provider, sv *state.Value[[]byte]) error {
	cStateWrites.Inc(ctx, 1)
	if a.st.Phase == core.None {
		return sv.Clear(sp)
	}
	a.sbuf = statecoder.Append(a.sbuf[:0], &a.st)
	// The runner may keep the slice; hand it a copy.
	return sv.Write(sp, append([]byte(nil), a.sbuf...))
}

// arm sets the decision's timer. Processing-time timers are set relative to
// the wall clock, so a test clock shifts expiry checks but not timers.
func (a *adapter) arm(ctx context.Context, t core.Timer, nowMs int64, w beam.Window, set setTimer, proc bool) {
	switch t.Kind {
	case core.NoTimer:
		return
	case core.Finalize:
		set(time.UnixMilli(t.At), true)
	case core.Cleanup:
		if proc {
			set(time.Now().Add(time.Duration(t.At-nowMs)*time.Millisecond), false)
		} else {
			t = core.ClampToWindow(t, int64(w.MaxTimestamp()))
			set(time.UnixMilli(t.At), false)
		}
	}
	cTimerSets.Inc(ctx, 1)
}

func (a *adapter) process(ctx context.Context, w beam.Window, ts beam.EventTime, sp state.Provider, sv *state.Value[[]byte], set setTimer, proc bool, key beam.T, row beam.V, emit func(beam.EventTime, beam.T, beam.V)) error {
	kind := core.Insert
	if a.kf != nil {
		k, reason := a.kf.kind(reflect.ValueOf(row))
		if reason != "" { // validated upstream; never panic on data
			return fmt.Errorf("dedup: row reached the stateful step with %s", reason)
		}
		kind = k
	}
	if err := a.read(ctx, sp, sv); err != nil {
		return err
	}
	now := a.now(ts.ToTime()).UnixMilli()
	d := a.cfg.OnRow(&a.st, kind, int64(ts), now)
	if d.Expired {
		cKeysExpired.Inc(ctx, 1)
	}
	if d.Refreshed {
		cRefreshes.Inc(ctx, 1)
	}
	countOutcome(ctx, d.Outcome)
	switch d.Outcome {
	case core.Emit:
		if a.kf != nil {
			row = a.kf.asInsert(row)
		}
		emit(ts, key, row)
	case core.BecomeCandidate, core.ReplaceCandidate:
		a.buf.Reset()
		if err := a.enc.Encode(row, &a.buf); err != nil {
			return fmt.Errorf("dedup: encoding candidate: %w", err)
		}
		a.st.Cand = a.buf.Bytes()
	}
	if d.Write {
		if err := a.write(ctx, sp, sv); err != nil {
			return err
		}
	}
	a.arm(ctx, d.Timer, now, w, set, proc)
	return nil
}

func (a *adapter) onTimer(ctx context.Context, w beam.Window, ts beam.EventTime, sp state.Provider, sv *state.Value[[]byte], set setTimer, proc bool, key beam.T, emit func(beam.EventTime, beam.T, beam.V)) error {
	if err := a.read(ctx, sp, sv); err != nil {
		return err
	}
	cand := a.st.Cand
	// A cleanup timer holds nothing: its hold is the max timestamp.
	finalize := !proc && ts < mtime.MaxTimestamp
	nowT := a.now(ts.ToTime())
	if !finalize {
		nowT = a.now(time.Now())
	}
	now := nowT.UnixMilli()
	d := a.cfg.OnTimer(&a.st, finalize, int64(ts), now, int64(w.MaxTimestamp()))
	if d.Expired {
		cKeysExpired.Inc(ctx, 1)
	}
	if d.Emit {
		row, err := a.dec.Decode(bytes.NewReader(cand))
		if err != nil {
			return fmt.Errorf("dedup: decoding candidate: %w", err)
		}
		countOutcome(ctx, core.Emit)
		emit(mtime.Time(d.EmitTime), key, row)
	}
	if d.Write {
		if err := a.write(ctx, sp, sv); err != nil {
			return err
		}
	}
	a.arm(ctx, d.Timer, now, w, set, proc)
	return nil
}

// keepFirstFn has no timer: watermarkless mode without cleanup timers.
type keepFirstFn struct {
	State state.Value[[]byte]
	P     params
	a     adapter
}

func (f *keepFirstFn) Setup() error { return f.a.setup(&f.P) }

func (f *keepFirstFn) ProcessElement(ctx context.Context, w beam.Window, ts beam.EventTime, sp state.Provider, key beam.T, row beam.V, emit func(beam.EventTime, beam.T, beam.V)) error {
	return f.a.process(ctx, w, ts, sp, &f.State, nil, false, key, row, emit)
}

// keepFirstEventFn has one event-time timer family: finalization of
// event-time candidates and event-time cleanup.
type keepFirstEventFn struct {
	State state.Value[[]byte]
	Timer timers.EventTime
	P     params
	a     adapter
}

func (f *keepFirstEventFn) Setup() error { return f.a.setup(&f.P) }

func (f *keepFirstEventFn) ProcessElement(ctx context.Context, w beam.Window, ts beam.EventTime, sp state.Provider, tp timers.Provider, key beam.T, row beam.V, emit func(beam.EventTime, beam.T, beam.V)) error {
	return f.a.process(ctx, w, ts, sp, &f.State, eventSetter(f.Timer, tp), false, key, row, emit)
}

func (f *keepFirstEventFn) OnTimer(ctx context.Context, w beam.Window, ts beam.EventTime, sp state.Provider, tp timers.Provider, key beam.T, timer timers.Context, emit func(beam.EventTime, beam.T, beam.V)) error {
	return f.a.onTimer(ctx, w, ts, sp, &f.State, eventSetter(f.Timer, tp), false, key, emit)
}

// keepFirstProcFn has one processing-time timer family: state cleanup in
// watermarkless mode with StateTTL.
type keepFirstProcFn struct {
	State state.Value[[]byte]
	Timer timers.ProcessingTime
	P     params
	a     adapter
}

func (f *keepFirstProcFn) Setup() error { return f.a.setup(&f.P) }

func (f *keepFirstProcFn) ProcessElement(ctx context.Context, w beam.Window, ts beam.EventTime, sp state.Provider, tp timers.Provider, key beam.T, row beam.V, emit func(beam.EventTime, beam.T, beam.V)) error {
	return f.a.process(ctx, w, ts, sp, &f.State, procSetter(f.Timer, tp), true, key, row, emit)
}

func (f *keepFirstProcFn) OnTimer(ctx context.Context, w beam.Window, ts beam.EventTime, sp state.Provider, tp timers.Provider, key beam.T, timer timers.Context, emit func(beam.EventTime, beam.T, beam.V)) error {
	return f.a.onTimer(ctx, w, ts, sp, &f.State, procSetter(f.Timer, tp), true, key, emit)
}

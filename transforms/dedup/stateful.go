package dedup

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/timers"

	"github.com/beamdedup/beamdedup/coders/statecoder"
	"github.com/beamdedup/beamdedup/transforms/dedup/core"
	"github.com/beamdedup/beamdedup/transforms/rowkind"
)

// The DoFns below are thin adapters around core.Config: read the key's
// state, ask the core, write back, set the one timer, emit. There is one
// DoFn type per timer family, because Beam Go 2.77 hangs any DoFn that
// declares two timer fields (notes/beam-defects.md), so each configuration
// gets the variant with only the family it needs. KeepFirst and KeepLast
// share the variants and the adapter; params.Last picks the core's rules.

// stepNames are the names of a step's state and timer families. They are
// part of the persisted state's identity: never rename them.
type stepNames struct{ state, event, proc string }

var (
	firstNames = stepNames{"keepfirst", "keepfirst-event", "keepfirst-cleanup"}
	lastNames  = stepNames{"keeplast", "keeplast-event", "keeplast-cleanup"}
)

// params is the serialized configuration shared by the DoFn variants.
type params struct {
	Last       bool   // KeepLast's rules (core/last.go)
	Ordered    bool   // KeepLast: OnTime or SequenceBy orders rows
	Upsert     bool   // KeepLast: no -U rows
	Retract    bool   // KeepLast: RetractOnExpiry
	OutKindCol string // KeepLast: the column output kinds are written into
	SeqCol     string // KeepLast: SequenceBy
	EventTime  bool
	StateTTLMs int64
	EventTTLMs int64
	Reset      bool
	Cleanup    bool
	ValueType  beam.EncodedType
	KindCol    string
	Clock      string
}

// coreConfig is the core's configuration of the step. KeepLast's output is
// immediate, so it has no event-time finalization: OnTime only orders.
func (p *params) coreConfig() core.Config {
	return core.Config{
		EventTime: p.EventTime && !p.Last, StateTTL: p.StateTTLMs, EventTTL: p.EventTTLMs,
		ResetOnDuplicate: p.Reset, CleanupTimers: p.Cleanup,
		Ordered: p.Last && p.Ordered, Upsert: p.Upsert, RetractOnExpiry: p.Retract,
	}
}

// adapter is the per-instance runtime of a DoFn variant.
type adapter struct {
	cfg  core.Config
	last bool
	now  func(time.Time) time.Time
	kf   *kindField // the input's kind column (Changelog)
	okf  *kindField // KeepLast: the output's kind column
	sf   *seqField  // KeepLast: SequenceBy
	seq  []byte
	enc  beam.ElementEncoder
	dec  beam.ElementDecoder
	buf  bytes.Buffer
	st   core.State
	// Event-time timer tags decided by process for armEvent: the pending
	// candidate's tag and the tag of the candidate it replaced.
	tag, replaced string
}

func (a *adapter) setup(p *params) error {
	a.cfg, a.last = p.coreConfig(), p.Last
	var err error
	if a.now, err = resolveClock(p.Clock); err != nil {
		return err
	}
	if a.kf, err = optionalKindField(p.ValueType.T, p.KindCol); err != nil {
		return err
	}
	if p.Last {
		if a.okf, err = optionalKindField(p.ValueType.T, p.OutKindCol); err != nil {
			return err
		}
		if a.sf, err = optionalSeqField(p.ValueType.T, p.SeqCol); err != nil {
			return err
		}
	}
	if p.EventTime || p.Last {
		a.enc = beam.NewElementEncoder(p.ValueType.T)
		a.dec = beam.NewElementDecoder(p.ValueType.T)
	}
	return nil
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
	return sv.Write(sp, statecoder.Encode(&a.st)) // a fresh slice: the runner may keep it
}

// armEvent sets an event-time timer decision: finalization holds the output
// watermark at the candidate's time; cleanup holds nothing and is clamped to
// the window's end (core.ClampToWindow).
//
// A finalization carries its candidate in its tag when tag is set
// (candidateTag), so its firing needs no state read; replaced is the tag of
// the candidate it replaced, whose timer is moved to the new candidate's
// time with a hold that no longer matches its tag, which makes its firing
// stale without a state read too. Timers are never cleared: on Prism a
// clear fires the timer (notes/beam-defects.md).
func armEvent(ctx context.Context, t timers.EventTime, tp timers.Provider, tm core.Timer, w beam.Window, tag, replaced string) {
	switch tm.Kind {
	case core.Finalize:
		at := time.UnixMilli(tm.At)
		if replaced != "" && replaced != tag {
			t.Set(tp, at, timers.WithTag(replaced), timers.WithOutputTimestamp(at))
			cTimerSets.Inc(ctx, 1)
		}
		t.Set(tp, at, timers.WithTag(tag), timers.WithOutputTimestamp(at))
	case core.Cleanup:
		tm = core.ClampToWindow(tm, int64(w.MaxTimestamp()))
		t.Set(tp, time.UnixMilli(tm.At), timers.WithNoOutputTimestamp())
	default:
		return
	}
	cTimerSets.Inc(ctx, 1)
}

// maxTagCandidate is the largest encoded candidate carried in a timer tag;
// a larger one waits in state only, and its firing reads it from there.
const maxTagCandidate = 1024

// candidateTag is the timer tag that carries a candidate: its event time and
// encoded row, base64 so that runners holding tags as UTF-8 strings keep
// them intact. It is "" (the untagged timer) for a candidate too large, and
// for one at time 0: that is the hold of a cleared timer, which the Go SDK
// sends after firing a timer inline and Prism may fire (notes/beam-defects.md),
// so only the state could tell such a firing from a live one.
func candidateTag(at int64, cand []byte) string {
	if len(cand) > maxTagCandidate || at == 0 {
		return ""
	}
	b := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(cand)), uint64(at))
	return "c" + base64.RawURLEncoding.EncodeToString(append(b, cand...))
}

// parseCandidateTag reverses candidateTag.
func parseCandidateTag(tag string) (int64, []byte, error) {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(tag, "c"))
	if err != nil || !strings.HasPrefix(tag, "c") || len(b) < 8 {
		return 0, nil, fmt.Errorf("dedup: malformed timer tag %q", tag)
	}
	return int64(binary.BigEndian.Uint64(b)), b[8:], nil
}

// armProc sets a processing-time cleanup timer decision, relative to the
// wall clock, so a test clock shifts expiry checks but not timers.
func armProc(ctx context.Context, t timers.ProcessingTime, tp timers.Provider, tm core.Timer, nowMs int64) {
	if tm.Kind == core.NoTimer {
		return
	}
	t.Set(tp, time.Now().Add(time.Duration(tm.At-nowMs)*time.Millisecond), timers.WithNoOutputTimestamp())
	cTimerSets.Inc(ctx, 1)
}

// process decides on one row and returns the timer to set, with the
// processing time it was decided at.
func (a *adapter) process(ctx context.Context, ts beam.EventTime, sp state.Provider, sv *state.Value[[]byte], key beam.T, row beam.V, emit func(beam.EventTime, beam.T, beam.V)) (core.Timer, int64, error) {
	kind := rowkind.Insert
	if a.kf != nil {
		k, reason := a.kf.kind(reflect.ValueOf(row))
		if reason != "" { // validated upstream; never panic on data
			return core.Timer{}, 0, fmt.Errorf("dedup: row reached the stateful step with %s", reason)
		}
		kind = k
	}
	if a.last {
		return a.processLast(ctx, ts, sp, sv, key, kind, row, emit)
	}
	if err := a.read(ctx, sp, sv); err != nil {
		return core.Timer{}, 0, err
	}
	oldTime, oldCand := a.st.CandTime, a.st.Cand
	a.tag, a.replaced = "", ""
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
			return core.Timer{}, 0, fmt.Errorf("dedup: encoding candidate: %w", err)
		}
		a.st.Cand = a.buf.Bytes()
		a.tag = candidateTag(a.st.CandTime, a.st.Cand)
		if d.Outcome == core.ReplaceCandidate {
			a.replaced = candidateTag(oldTime, oldCand)
		}
	}
	if d.Write {
		if err := a.write(ctx, sp, sv); err != nil {
			return core.Timer{}, 0, err
		}
	}
	return d.Timer, now, nil
}

// onTimer decides on a firing of the key's timer and returns the timer to
// set next, with the processing time it was decided at. ts is the firing's
// hold: a cleanup timer holds nothing, so its hold is the max timestamp.
func (a *adapter) onTimer(ctx context.Context, w beam.Window, ts beam.EventTime, sp state.Provider, sv *state.Value[[]byte], proc bool, key beam.T, tag string, emit func(beam.EventTime, beam.T, beam.V)) (core.Timer, int64, error) {
	if tag == "" {
		if err := a.read(ctx, sp, sv); err != nil {
			return core.Timer{}, 0, err
		}
	} else {
		// A tagged finalization carries its candidate. It is the key's
		// pending candidate unless a replacement moved it, giving it a hold
		// other than its time: a candidate's state is its time and row.
		at, cand, err := parseCandidateTag(tag)
		if err != nil {
			return core.Timer{}, 0, err
		}
		if int64(ts) != at {
			return core.Timer{}, 0, nil // replaced: stale
		}
		a.st = core.State{Phase: core.Pending, CandTime: at, Cand: cand}
	}
	cand := a.st.Cand
	finalize := !proc && ts < mtime.MaxTimestamp
	clockIn := time.Now()
	if finalize {
		clockIn = ts.ToTime() // the candidate's time, for a row-driven test clock
	}
	now := a.now(clockIn).UnixMilli()
	candTime := a.st.CandTime
	d := a.cfg.OnTimer(&a.st, finalize, int64(ts), now, int64(w.MaxTimestamp()))
	if d.Expired {
		cKeysExpired.Inc(ctx, 1)
	}
	if d.Retract {
		// KeepLast: the expired row, retracted at its own time.
		if err := a.emitLast(ctx, mtime.Time(candTime), key, core.Emission{Kind: rowkind.Delete, Old: true}, cand, nil, emit); err != nil {
			return core.Timer{}, 0, err
		}
	}
	if d.Emit {
		row, err := a.dec.Decode(bytes.NewReader(cand))
		if err != nil {
			return core.Timer{}, 0, fmt.Errorf("dedup: decoding candidate: %w", err)
		}
		countOutcome(ctx, core.Emit)
		emit(mtime.Time(d.EmitTime), key, row)
	}
	if d.Write {
		if err := a.write(ctx, sp, sv); err != nil {
			return core.Timer{}, 0, err
		}
	}
	return d.Timer, now, nil
}

// keepFirstFn has no timer: watermarkless mode without cleanup timers.
type keepFirstFn struct {
	State state.Value[[]byte]
	P     params
	a     adapter
}

func (f *keepFirstFn) Setup() error { return f.a.setup(&f.P) }

func (f *keepFirstFn) ProcessElement(ctx context.Context, w beam.Window, ts beam.EventTime, sp state.Provider, key beam.T, row beam.V, emit func(beam.EventTime, beam.T, beam.V)) error {
	_, _, err := f.a.process(ctx, ts, sp, &f.State, key, row, emit) // no timer family, no timer
	return err
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
	t, _, err := f.a.process(ctx, ts, sp, &f.State, key, row, emit)
	armEvent(ctx, f.Timer, tp, t, w, f.a.tag, f.a.replaced)
	return err
}

func (f *keepFirstEventFn) OnTimer(ctx context.Context, w beam.Window, ts beam.EventTime, sp state.Provider, tp timers.Provider, key beam.T, timer timers.Context, emit func(beam.EventTime, beam.T, beam.V)) error {
	t, _, err := f.a.onTimer(ctx, w, ts, sp, &f.State, false, key, timer.Tag, emit)
	armEvent(ctx, f.Timer, tp, t, w, "", "")
	return err
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
	t, now, err := f.a.process(ctx, ts, sp, &f.State, key, row, emit)
	armProc(ctx, f.Timer, tp, t, now)
	return err
}

func (f *keepFirstProcFn) OnTimer(ctx context.Context, w beam.Window, ts beam.EventTime, sp state.Provider, tp timers.Provider, key beam.T, timer timers.Context, emit func(beam.EventTime, beam.T, beam.V)) error {
	t, now, err := f.a.onTimer(ctx, w, ts, sp, &f.State, true, key, "", emit)
	armProc(ctx, f.Timer, tp, t, now)
	return err
}

// processLast decides on one KeepLast row: it encodes the row with its kind
// normalized to +I (so rows equal but for the kind are identical, and the
// stored row is ready to emit with any kind), asks the core and emits.
func (a *adapter) processLast(ctx context.Context, ts beam.EventTime, sp state.Provider, sv *state.Value[[]byte], key beam.T, kind rowkind.Kind, row beam.V, emit func(beam.EventTime, beam.T, beam.V)) (core.Timer, int64, error) {
	norm := row
	if a.okf != nil {
		norm = a.okf.withKind(row, rowkind.Insert)
	}
	a.buf.Reset()
	if err := a.enc.Encode(norm, &a.buf); err != nil {
		return core.Timer{}, 0, fmt.Errorf("dedup: encoding row: %w", err)
	}
	var seq []byte
	if a.sf != nil {
		var reason string
		if a.seq, reason = a.sf.appendTo(a.seq[:0], reflect.ValueOf(row)); reason != "" { // validated upstream
			return core.Timer{}, 0, fmt.Errorf("dedup: row reached the stateful step with %s", reason)
		}
		seq = a.seq
	}
	if err := a.read(ctx, sp, sv); err != nil {
		return core.Timer{}, 0, err
	}
	old := a.st.Cand // the state's own bytes, not reused by the read
	now := a.now(ts.ToTime()).UnixMilli()
	// seq and the row's bytes are scratch buffers: a.st may keep them only
	// until write encodes it (a fresh slice), and the next read replaces a.st.
	d := a.cfg.OnLastRow(&a.st, core.LastRow{Kind: kind, Time: int64(ts), Seq: seq, Row: a.buf.Bytes()}, now)
	if d.Expired {
		cKeysExpired.Inc(ctx, 1)
	}
	if d.Refreshed {
		cRefreshes.Inc(ctx, 1)
	}
	cLastOutcome[d.Outcome].Inc(ctx, 1)
	for _, e := range d.Emissions() {
		if err := a.emitLast(ctx, ts, key, e, old, norm, emit); err != nil {
			return core.Timer{}, 0, err
		}
	}
	if d.Write {
		if err := a.write(ctx, sp, sv); err != nil {
			return core.Timer{}, 0, err
		}
	}
	return d.Timer, now, nil
}

// emitLast emits one KeepLast output row at ts: the stored row old
// (decoded) or the arriving row, with the emission's kind.
func (a *adapter) emitLast(ctx context.Context, ts beam.EventTime, key beam.T, e core.Emission, old []byte, row any, emit func(beam.EventTime, beam.T, beam.V)) error {
	if e.Old {
		var err error
		if row, err = a.dec.Decode(bytes.NewReader(old)); err != nil {
			return fmt.Errorf("dedup: decoding the stored row: %w", err)
		}
	}
	if a.okf != nil && (e.Old || e.Kind != rowkind.Insert) { // the arriving row is already +I (processLast)
		row = a.okf.withKind(row, e.Kind)
	}
	if e.Kind != rowkind.Insert { // a +I is counted as its row's outcome
		cEmittedKind[e.Kind].Inc(ctx, 1)
	}
	emit(ts, key, row)
	return nil
}

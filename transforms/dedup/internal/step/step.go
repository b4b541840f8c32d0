package step

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
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/typex"

	"github.com/beamdedup/beamdedup/internal/rowcol"
	"github.com/beamdedup/beamdedup/internal/testhook"
	"github.com/beamdedup/beamdedup/transforms/dedup/internal/core"
	"github.com/beamdedup/beamdedup/transforms/internal/prismwarn"
	"github.com/beamdedup/beamdedup/transforms/rowkind"
)

// The stateful step: per key, it reads the key's state, asks the rules
// (core.First or core.Last, through core.Rules), writes what changed, sets
// the one timer the decision names and emits. Step is the same for every
// stateful DoFn; the DoFns differ only in their state cell (marks or
// versions, state.go) and their timer family (dofns.go), because Beam Go
// 2.77 hangs a DoFn that declares two timer fields (notes/beam-defects.md),
// so each plan gets the type with only the family it needs.

// Params is the serialized configuration of a stateful step.
type Params struct {
	Rules core.Config
	// Last: KeepLast's rules, which compare and store every row; else
	// KeepFirst's.
	Last      bool
	KeyType   beam.EncodedType
	ValueType beam.EncodedType
	// KindCol is the input's kind column (KindColumn); OutKindCol the column
	// each output row's kind is written into (the same KindColumn: KeepLast
	// writes the row's new kind, KeepFirst +I).
	KindCol, OutKindCol string
	SeqCol              string // SequenceBy
	TimeCol             string // OnTime: its microseconds order rows
	Clock               string
	Dropped             bool   // emit the rows dropped (OutputDropped)
	Metrics             string // the namespace of the transform's counters
	// Overlap is how the step issues its state requests (overlap.go).
	Overlap OverlapMode
	// Buckets is how many key-hash buckets the step keeps state in
	// (buckets.go); 0 keeps a cell per key.
	Buckets int
}

// Step is the runtime of a stateful DoFn.
type Step struct {
	rules core.Rules
	store Store
	cache *bundleCache
	// readsRow: the rules compare and store rows (KeepLast), so every row
	// is encoded; KeepFirst's are encoded only to become a candidate.
	readsRow bool
	dropped  bool
	m        *metricSet
	now      func(time.Time) time.Time
	in       Columns            // the kind, OnTime and SequenceBy columns rows are read by
	outKind  *rowcol.KindColumn // where an output row's kind is written
	seqBuf   []byte
	enc      beam.ElementEncoder
	dec      beam.ElementDecoder
	buf      bytes.Buffer
	io       stateIO
	// table is the bucket whose rows or firing the step decides, when it
	// keeps state per bucket: keys are read and written there.
	table *bucketTable
}

// setup sets the step up on its state cell: a Store of a cell per key, or
// the bucketStore of a cell per bucket.
func (s *Step) setup(p *Params, c cell) error {
	prismwarn.Check(context.Background(), prismwarn.Run, "a dedup step")
	s.store, _ = c.(Store)
	s.cache = newBundleCache(p.KeyType.T)
	s.readsRow = p.Last
	s.dropped = p.Dropped
	s.m = newMetricSet(p.Metrics)
	if p.Last {
		s.rules = core.Last{Config: p.Rules}
	} else {
		s.rules = core.First{Config: p.Rules}
	}
	var err error
	if s.now, err = testhook.ResolveClock(p.Clock); err != nil {
		return err
	}
	s.in = Columns{TimeCol: p.TimeCol, KindCol: p.KindCol, SeqCol: p.SeqCol}
	if err = s.in.Setup(p.ValueType.T); err != nil {
		return err
	}
	if s.outKind, err = optionalKind(p.ValueType.T, p.OutKindCol); err != nil {
		return err
	}
	s.enc = beam.NewElementEncoder(p.ValueType.T)
	s.dec = beam.NewElementDecoder(p.ValueType.T)
	s.io = newStateIO(context.Background(), p.Metrics, p.Overlap, c, s.cache, s.m)
	return nil
}

// arming is a timer decision with what setting it needs.
type arming struct {
	core.Timer
	now int64 // the processing time it was decided at
	// tag is an event-time candidate's timer tag (candidateTag); replaced
	// the tag of the candidate it replaced, whose timer is moved, and
	// replacedAt that candidate's time.
	tag, replaced string
	replacedAt    int64
}

// arrival is a row arriving at the step, as the rules see it (its kind,
// time, sequence value and, for rules that read rows, its encoding), and
// the row as kept and emitted as +I, made when first needed; enc is the
// row's encoding when the caller has it (a bucket's batch), else nil.
type arrival struct {
	core.Row
	row      any
	asInsert any
	enc      []byte
}

// arrive reads a row's kind, sequence value and the microseconds of its
// OnTime value (the keying step validated them, and set ts from that
// value's millisecond) and encodes it when the rules read rows.
func (s *Step) arrive(ts beam.EventTime, row any, enc []byte) (arrival, error) {
	a := arrival{Row: core.Row{Kind: rowkind.Insert, Time: int64(ts)}, row: row, enc: enc}
	if s.in.any() {
		c, reason := s.in.check(ts, reflect.ValueOf(row), s.seqBuf[:0])
		if reason != "" { // validated upstream; never panic on data
			return arrival{}, fmt.Errorf("dedup: row reached the stateful step with %s", reason)
		}
		if c.seq != nil {
			s.seqBuf = c.seq
		}
		a.Row = c.row()
	}
	if s.readsRow {
		var err error
		a.Row.Row, err = s.encodeInsert(&a)
		return a, err
	}
	return a, nil
}

// encodeInsert is the encoding of the arriving row's insert form: the
// bytes it came in when that form is the row itself (the step writes no
// kind column), else encoded into the step's scratch buffer.
func (s *Step) encodeInsert(a *arrival) ([]byte, error) {
	if a.enc != nil && s.outKind == nil {
		return a.enc, nil
	}
	return s.encode(s.insertForm(a))
}

// insertForm is the arriving row with its kind normalized to +I, so that
// rows equal but for the kind are identical: how it is kept and emitted.
func (s *Step) insertForm(a *arrival) any {
	if a.asInsert == nil {
		a.asInsert = s.withKind(a.row, rowkind.Insert)
	}
	return a.asInsert
}

// process decides on one row of key in window w, arriving at processing
// time at, and returns the timer to set. enc is the row's encoding when
// the caller has it, else nil.
func (s *Step) process(ctx context.Context, w beam.Window, ts beam.EventTime, at time.Time, sp state.Provider, key beam.T, row beam.V, enc []byte, emit, drop rowEmit) (arming, error) {
	a, err := s.arrive(ts, row, enc)
	if err != nil {
		return arming{}, err
	}
	id, err := s.cache.id(w, key)
	if err != nil {
		return arming{}, err
	}
	was, err := s.read(ctx, sp, id)
	if err != nil {
		return arming{}, err
	}
	st := was.st
	now := at.UnixMilli()
	// a.Row and a.Seq are scratch buffers: st may keep them only until the
	// write below encodes it.
	d := s.rules.OnRow(&st, a.Row, now)
	if d.Stored && a.Row.Row == nil {
		if st.Cand, err = s.encodeInsert(&a); err != nil {
			return arming{}, err
		}
	}
	s.m.decision(ctx, &d)
	if s.dropped {
		if err := s.drop(ts, key, row, &d, &was, drop); err != nil {
			return arming{}, err
		}
	}
	for _, e := range d.Emissions() {
		var arriving any
		if !e.Old {
			arriving = s.insertForm(&a)
		}
		if err := s.emit(ctx, ts, key, e, was.st.Cand, arriving, emit); err != nil {
			return arming{}, err
		}
	}
	after := was
	if d.Write {
		if after, err = s.write(ctx, sp, id, &was, &st); err != nil {
			return arming{}, err
		}
	}
	t := arming{Timer: d.Timer, now: now}
	if d.Timer.Kind == core.Finalize && s.table == nil { // a bucket's firing reads its table
		t.tag = candidateTag(st.CandTime, after.versions, st.Cand)
		if d.Outcome == core.ReplaceCandidate {
			t.replaced, t.replacedAt = candidateTag(was.st.CandTime, was.versions, was.st.Cand), was.st.CandTime
		}
	}
	return t, nil
}

// drop emits the row a decision dropped: the arriving row, or the
// candidate it replaced (decoded from the state, at its own time).
func (s *Step) drop(ts beam.EventTime, key, row any, d *core.Decision, was *stored, drop rowEmit) error {
	switch {
	case d.Outcome == core.ReplaceCandidate:
		old, err := s.dec.Decode(bytes.NewReader(was.st.Cand))
		if err != nil {
			return fmt.Errorf("dedup: decoding the replaced candidate: %w", err)
		}
		drop(mtime.Time(was.st.CandTime), key, old)
	case d.Outcome.DropsRow():
		drop(ts, key, row)
	}
	return nil
}

// onTimer decides on a firing of the key's timer and returns the timer to
// set next. ts is the firing's hold (a cleanup timer holds nothing: its
// hold is the max timestamp); tag is an event-time candidate's tag, or "".
func (s *Step) onTimer(ctx context.Context, w beam.Window, ts beam.EventTime, sp state.Provider, proc bool, key beam.T, tag string, emit rowEmit) (arming, error) {
	id, err := s.cache.id(w, key)
	if err != nil {
		return arming{}, err
	}
	var was stored
	if tag == "" {
		if was, err = s.read(ctx, sp, id); err != nil {
			return arming{}, err
		}
	} else {
		// A tagged finalization carries its candidate: its time, the row
		// and the versions its state was written into. It is the key's
		// pending candidate unless a replacement moved it, giving it a hold
		// other than its time: a candidate's state is its time and row.
		at, held, cand, err := parseCandidateTag(tag)
		if err != nil {
			return arming{}, err
		}
		if int64(ts) != at {
			return arming{}, nil // replaced: stale
		}
		was = stored{st: core.State{Phase: core.Pending, CandTime: at, Cand: cand}, versions: held}
	}
	st := was.st
	finalize := !proc && ts < mtime.MaxTimestamp
	clockIn := time.Now()
	if finalize {
		clockIn = ts.ToTime() // the candidate's time, for a row-driven test clock
	}
	now := s.now(clockIn).UnixMilli()
	d := s.rules.OnTimer(&st, finalize, int64(ts), now, int64(w.MaxTimestamp()))
	if d.Expired {
		s.m.keysExpired.Inc(ctx, 1)
	}
	if d.Emit {
		if d.Kind == rowkind.Insert {
			s.m.outcomeOf(ctx, core.Emit, 1) // a finalized candidate
		}
		if err := s.emit(ctx, mtime.Time(d.EmitTime), key, core.Emission{Kind: d.Kind, Old: true}, was.st.Cand, nil, emit); err != nil {
			return arming{}, err
		}
	}
	if d.Write {
		if _, err := s.write(ctx, sp, id, &was, &st); err != nil {
			return arming{}, err
		}
	}
	return arming{Timer: d.Timer, now: now}, nil
}

// emit emits one output row at ts: the key's stored row old (decoded) or
// the arriving row (in its insert form), with the emission's kind in the
// kind column.
func (s *Step) emit(ctx context.Context, ts beam.EventTime, key beam.T, e core.Emission, old []byte, row any, emit rowEmit) error {
	if e.Old {
		var err error
		if row, err = s.dec.Decode(bytes.NewReader(old)); err != nil {
			return fmt.Errorf("dedup: decoding the stored row: %w", err)
		}
	}
	if e.Kind != rowkind.Insert || e.Old {
		row = s.withKind(row, e.Kind)
	}
	if e.Kind != rowkind.Insert { // a +I is counted as its row's outcome
		s.m.emittedKind[e.Kind].Inc(ctx, 1)
	}
	emit(ts, key, row)
	return nil
}

// withKind returns row with its kind k, a copy, when there is a kind column
// to write it into.
func (s *Step) withKind(row any, k rowkind.Kind) any {
	if s.outKind == nil {
		return row
	}
	return s.outKind.With(row, k)
}

// encode returns the encoding of row in the step's scratch buffer, valid
// until the next encode.
func (s *Step) encode(row any) ([]byte, error) {
	s.buf.Reset()
	if err := s.enc.Encode(row, &s.buf); err != nil {
		return nil, fmt.Errorf("dedup: encoding row: %w", err)
	}
	return s.buf.Bytes(), nil
}

// armEvent sets an event-time timer decision: finalization holds the output
// watermark at the candidate's time; cleanup holds nothing and is clamped to
// the window's end (core.ClampToWindow).
//
// A finalization carries its candidate in its tag when a.tag is set
// (candidateTag), so its firing needs no state read; a.replaced is the tag
// of the candidate it replaced, whose timer is moved to the new candidate's
// time with a hold that no longer matches its tag, which makes its firing
// stale without a state read too: a millisecond later when the replacement
// is in the replaced candidate's millisecond (earlier by microseconds).
// (Moving it with no hold instead leaves Prism holding the watermark for
// ever.) Timers are never cleared: on Prism a clear fires the timer
// (notes/beam-defects.md).
func armEvent(ctx context.Context, m *metricSet, t timers.EventTime, tp timers.Provider, a arming, w beam.Window) {
	switch a.Kind {
	case core.Finalize:
		at := time.UnixMilli(a.At)
		if a.replaced != "" && a.replaced != a.tag {
			stale := at
			if a.replacedAt == a.At {
				stale = at.Add(time.Millisecond)
			}
			t.Set(tp, stale, timers.WithTag(a.replaced), timers.WithOutputTimestamp(stale))
			m.timerSets.Inc(ctx, 1)
		}
		t.Set(tp, at, timers.WithTag(a.tag), timers.WithOutputTimestamp(at))
	case core.Cleanup:
		tm := core.ClampToWindow(a.Timer, int64(w.MaxTimestamp()))
		t.Set(tp, time.UnixMilli(tm.At), timers.WithNoOutputTimestamp())
	default:
		return
	}
	m.timerSets.Inc(ctx, 1)
}

// armProc sets a processing-time cleanup timer decision, relative to the
// wall clock, so a test clock shifts expiry checks but not timers.
func armProc(ctx context.Context, m *metricSet, t timers.ProcessingTime, tp timers.Provider, a arming) {
	if a.Kind == core.NoTimer {
		return
	}
	t.Set(tp, time.Now().Add(time.Duration(a.At-a.now)*time.Millisecond), timers.WithNoOutputTimestamp())
	m.timerSets.Inc(ctx, 1)
}

// startBundle forgets what the last bundle cached, and what it had in
// flight: a failed bundle may have written nothing of it.
func (s *Step) startBundle() {
	s.cache.reset()
	s.io.abort(nil)
	s.io = s.io.next()
}

// add takes a row of a step without timers: decided now or batched
// (stateIO.take).
func (s *Step) add(ctx context.Context, pn typex.PaneInfo, w beam.Window, ts beam.EventTime, sp state.Provider, key beam.T, row beam.V, emit, drop rowEmit) error {
	if err := s.io.admit(ctx, sp); err != nil {
		return err
	}
	return s.io.take(ctx, pendingRow{pane: pn, w: w, ts: ts, at: s.now(ts.ToTime()), sp: sp, key: key, row: row}, s, emit, drop)
}

func (s *Step) decideRow(ctx context.Context, r pendingRow, emit, drop rowEmit) error {
	_, err := s.process(ctx, r.w, r.ts, r.at, r.sp, r.key, r.row, nil, emit, drop)
	return err
}

// decide decides a row in its own ProcessElement, for a step with timers,
// and returns the timer to set.
func (s *Step) decide(ctx context.Context, w beam.Window, ts beam.EventTime, sp state.Provider, key beam.T, row beam.V, emit, drop rowEmit) (arming, error) {
	if err := s.io.admit(ctx, sp); err != nil {
		return arming{}, err
	}
	a, err := s.process(ctx, w, ts, s.now(ts.ToTime()), sp, key, row, nil, emit, drop)
	if err != nil {
		return arming{}, s.io.abort(err)
	}
	return a, nil
}

// fire decides a firing of the key's timer and returns the timer to set
// next (onTimer).
func (s *Step) fire(ctx context.Context, w beam.Window, ts beam.EventTime, sp state.Provider, proc bool, key beam.T, tag string, emit rowEmit) (arming, error) {
	if err := s.io.admit(ctx, sp); err != nil {
		return arming{}, err
	}
	a, err := s.onTimer(ctx, w, ts, sp, proc, key, tag, emit)
	if err != nil {
		return arming{}, s.io.abort(err)
	}
	return a, nil
}

// read returns the state of the key called id: from its bucket's table, the
// bundle's cache, or read through the stateIO.
func (s *Step) read(ctx context.Context, sp state.Provider, id []byte) (stored, error) {
	if s.table != nil {
		return s.table.get(id)
	}
	if was, ok := s.cache.get(id); ok {
		s.m.stateCacheHits.Inc(ctx, 1)
		return was, nil
	}
	was, err := s.io.read(ctx, sp, id)
	if err != nil {
		return stored{}, err
	}
	s.cache.put(id, was)
	return was, nil
}

// write stores st, which the key called id's state became since it was
// read as was: in its bucket's table, or counted and cached now, its
// requests made through the stateIO.
func (s *Step) write(ctx context.Context, sp state.Provider, id []byte, was *stored, st *core.State) (stored, error) {
	if s.table != nil {
		s.table.put(id, st) // written with the bucket's other keys (bucketstep.go)
		return stored{}, nil
	}
	c, after, err := s.store.plan(ctx, s.m, was, st)
	if err != nil {
		return stored{}, err
	}
	s.cache.put(id, after)
	if !c.none() {
		if err := s.io.write(sp, id, c); err != nil {
			return stored{}, err
		}
	}
	return after, nil
}

// finishBundle decides what the batch holds and waits until every request
// is answered.
func (s *Step) finishBundle(ctx context.Context, emit, drop rowEmit) error {
	return s.io.finish(ctx, s, emit, drop)
}

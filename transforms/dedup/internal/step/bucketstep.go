package step

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/timers"

	"github.com/beamdedup/beamdedup/transforms/dedup/internal/core"
	"github.com/beamdedup/beamdedup/transforms/dedup/internal/statecoder"
)

// The stateful step on state per bucket (buckets.go): BucketRows batches a
// bundle's keyed rows per bucket before the shuffle, and the stateful DoFn,
// keyed by bucket, decides each row of a batch on its bucket's table with
// the same Step (the same rules, counters and output) as the per-key
// layout. A bucket is read once per bundle. Its changes are written once
// per bundle where the step overlaps its requests (a provider held past its
// element's call until the bundle ends: reliance.go), else once per batch.
// Its keys' timers are its table's, and the bucket's own timers stand for
// them (arm); a firing decides every key due by then, in time order.

// BucketRows batches a bundle's keyed rows (KV<key, row>, the keying
// step's output) by their key's bucket into KV<bucket key, batch>: each
// batch holds rows of one bucket, each as its key, its element time and its
// encoding, all length-prefixed, in element-time order, rows of one time in
// arrival order. A batch is emitted at its earliest row's time when it
// reaches MaxBytes and at the bundle's end.
//
// The order is the one a key's rows reach the per-key layout's step in: a
// runner that orders a key's elements before a stateful step (Prism hands a
// key its bundle's elements by time) orders each row there, where a batch
// is one element and its rows would keep the order of the keying step. So
// a rule that goes by arrival (KeepLast without OnTime or SequenceBy) sees
// a key's rows in the same order in both layouts: a row emitted after
// another but timed before it (a FinishBundle's row beside a GroupByKey's
// pane) is decided first in both.
type BucketRows struct {
	RowType  beam.EncodedType
	Buckets  int
	MaxBytes int // 0: defaultBucketBytes

	enc     beam.ElementEncoder
	buf     bytes.Buffer
	batches map[uint32]*batch
	keys    map[uint32][]byte
}

// bucketBatchEmit emits a bucket's batch.
type bucketBatchEmit = func(beam.EventTime, []byte, []byte)

func (f *BucketRows) Setup() error {
	if err := needBuckets(f.Buckets); err != nil {
		return err
	}
	f.enc = beam.NewElementEncoder(f.RowType.T)
	f.batches = make(map[uint32]*batch)
	f.keys = make(map[uint32][]byte)
	return nil
}

// StartBundle drops what a failed bundle may have left.
func (f *BucketRows) StartBundle(_ bucketBatchEmit) { clear(f.batches) }

func (f *BucketRows) ProcessElement(ts beam.EventTime, key []byte, row beam.V, emit bucketBatchEmit) error {
	f.buf.Reset()
	if err := f.enc.Encode(row, &f.buf); err != nil {
		return fmt.Errorf("dedup: encoding row: %w", err)
	}
	b := bucketOf(key, f.Buckets)
	p := f.batches[b]
	if p == nil {
		p = &batch{ts: ts}
		f.batches[b] = p
	}
	p.ts = min(p.ts, ts)
	if len(p.b) > 0 && ts < p.last {
		p.unordered = true
	}
	p.last = ts
	p.b = binary.AppendUvarint(p.b, uint64(len(key)))
	p.b = append(p.b, key...)
	p.b = binary.AppendVarint(p.b, int64(ts))
	p.b = binary.AppendUvarint(p.b, uint64(f.buf.Len()))
	p.b = append(p.b, f.buf.Bytes()...)
	if len(p.b) >= cmp.Or(f.MaxBytes, defaultBucketBytes) {
		f.emit(b, p, emit)
	}
	return nil
}

// FinishBundle emits the bundle's batches not emitted yet, by bucket (an
// order of no consequence, but the same in every run).
func (f *BucketRows) FinishBundle(emit bucketBatchEmit) {
	buckets := make([]uint32, 0, len(f.batches))
	for b := range f.batches {
		buckets = append(buckets, b)
	}
	slices.Sort(buckets)
	for _, b := range buckets {
		f.emit(b, f.batches[b], emit)
	}
}

func (f *BucketRows) emit(b uint32, p *batch, emit bucketBatchEmit) {
	k := f.keys[b]
	if k == nil {
		k = bucketKey(b)
		f.keys[b] = k
	}
	if p.unordered {
		p.b = inTimeOrder(p.b)
	}
	emit(p.ts, k, p.b)
	delete(f.batches, b) // the emitted slice is the runner's now
}

// inTimeOrder is a batch of rows (BucketRows) with its rows sorted by
// element time, stably: rows of one time keep their arrival order.
func inTimeOrder(b []byte) []byte {
	type span struct {
		ts         beam.EventTime
		start, end int
	}
	var spans []span
	for rest := b; len(rest) > 0; {
		_, ts, _, next, err := nextRow(rest)
		if err != nil {
			return b // a batch this step wrote: the decision reports it
		}
		start := len(b) - len(rest)
		spans = append(spans, span{ts, start, len(b) - len(next)})
		rest = next
	}
	slices.SortStableFunc(spans, func(x, y span) int { return cmp.Compare(x.ts, y.ts) })
	out := make([]byte, 0, len(b))
	for _, sp := range spans {
		out = append(out, b[sp.start:sp.end]...)
	}
	return out
}

// nextRow splits a batch's first row, its key, element time and encoding,
// from the rest.
func nextRow(b []byte) (key []byte, ts beam.EventTime, row, rest []byte, err error) {
	key, rest, ok := statecoder.LengthPrefixed(b)
	t, k := binary.Varint(rest) // nothing when rest is nil
	if ok && k > 0 {
		if row, rest, ok = statecoder.LengthPrefixed(rest[k:]); ok {
			return key, beam.EventTime(t), row, rest, nil
		}
	}
	return nil, 0, nil, nil, fmt.Errorf("dedup: corrupt batch of rows")
}

// bucketed is what the runtimes of the stateful DoFns that keep state per
// bucket share: the step, its bundle's tables, and the one timer family,
// if any.
type bucketed struct {
	s       Step
	tables  map[string]*bucketTable // the bundle's, by bucket key
	held    map[state.Provider]string
	entries int // held in the tables
	limit   int // maxTableEntries (a test's own, smaller)
	rd      bytes.Reader
	// the timer family: event time, processing time, or none
	event *timers.EventTime
	proc  *timers.ProcessingTime
}

// needBuckets checks that a DoFn of state per bucket has its bucket count.
// Options are validated where the transform is built (StateBuckets's
// range, the input it applies to), which makes these DoFns only with a
// count; this guards a DoFn made otherwise, which would hash its keys
// into another count than its state's.
func needBuckets(n int) error {
	if n <= 0 {
		return fmt.Errorf("dedup: state per bucket needs a bucket count, got %d", n)
	}
	return nil
}

func (b *bucketed) setup(p *Params, cell *state.Bag[[]byte]) error {
	if err := needBuckets(p.Buckets); err != nil {
		return err
	}
	b.tables = make(map[string]*bucketTable)
	b.held = make(map[state.Provider]string)
	b.limit = maxTableEntries
	return b.s.setup(p, bucketStore{cell: cell, buckets: p.Buckets})
}

func (b *bucketed) startBundle() {
	b.s.startBundle()
	b.forget()
}

// forget drops the bundle's tables.
func (b *bucketed) forget() {
	clear(b.tables)
	clear(b.held)
	b.entries = 0
}

// deferring reports whether a bucket's writes wait for the bundle's end:
// while the step overlaps its requests, which it does only where the SDK
// was checked to let a provider outlive its element (reliance.go).
func (b *bucketed) deferring() bool { return b.s.Overlapping() }

// table is the bucket's table: the bundle's, or read through sp.
func (b *bucketed) table(ctx context.Context, sp state.Provider, key []byte) (*bucketTable, error) {
	if b.entries >= b.limit {
		// Whether the keys were read or added by the bundle's rows: a
		// bundle of only new keys fills its tables as surely.
		if err := b.writeAll(ctx); err != nil {
			return nil, err
		}
		b.forget()
	}
	t := b.tables[string(key)]
	if t != nil {
		b.s.m.stateCacheHits.Inc(ctx, 1)
	} else {
		was, err := b.s.io.read(ctx, sp, key)
		if err != nil {
			return nil, err
		}
		t = was.table
		t.key = bytes.Clone(key)
		b.tables[string(t.key)] = t
		b.entries += len(t.entries)
	}
	if b.deferring() {
		if other, ok := b.held[sp]; ok && other != string(t.key) {
			return nil, b.s.io.(*overlapped).providerReused()
		}
		if t.sp != nil {
			delete(b.held, t.sp)
		}
		t.sp = sp
		b.held[sp] = string(t.key)
	}
	return t, nil
}

// decide decides a batch's rows of the bucket key, arriving through sp.
func (b *bucketed) decide(ctx context.Context, sp state.Provider, key, rows []byte, emit, drop rowEmit) (*bucketTable, error) {
	if err := b.s.io.admit(ctx, sp); err != nil {
		return nil, err
	}
	t, err := b.table(ctx, sp, key)
	if err != nil {
		return nil, b.s.io.abort(err)
	}
	b.s.table = t
	defer func() { b.s.table = nil }()
	before := len(t.entries)
	defer func() { b.entries += len(t.entries) - before }() // the keys added, less those gone
	for len(rows) > 0 {
		k, ts, enc, rest, err := nextRow(rows)
		if err != nil {
			return nil, b.s.io.abort(err)
		}
		rows = rest
		b.rd.Reset(enc)
		row, err := b.s.dec.Decode(&b.rd)
		if err != nil {
			return nil, b.s.io.abort(fmt.Errorf("dedup: decoding a batch's row: %w", err))
		}
		// enc is the row as BucketRows encoded it with the step's coder: the
		// step keeps those bytes where it would encode the row again.
		a, err := b.s.process(ctx, window.GlobalWindow{}, ts, b.s.now(ts.ToTime()), sp, k, row, enc, emit, drop)
		if err != nil {
			return nil, b.s.io.abort(err)
		}
		b.setTimer(t, k, a.Timer)
	}
	return t, b.settle(ctx, t, sp)
}

// fire decides a firing of a bucket's timer: every key whose timer is due,
// earliest first. An event-time timer holds the watermark at its own time,
// so ts, its hold, is its time; a processing-time timer's keys are due by
// the clock.
func (b *bucketed) fire(ctx context.Context, ts beam.EventTime, sp state.Provider, key []byte, emit rowEmit) (*bucketTable, error) {
	if err := b.s.io.admit(ctx, sp); err != nil {
		return nil, err
	}
	t, err := b.table(ctx, sp, key)
	if err != nil {
		return nil, b.s.io.abort(err)
	}
	due := int64(ts)
	if b.proc != nil {
		t.hasArmed = false // the firing took the bucket's timer
		due = b.s.now(time.Now()).UnixMilli()
	} else {
		delete(t.times, due) // the firing took the timer of its time
	}
	b.s.table = t
	defer func() { b.s.table = nil }()
	before := len(t.entries)
	defer func() { b.entries += len(t.entries) - before }() // less the keys gone
	for {
		k, tm, ok := t.popDue(due)
		if !ok {
			break
		}
		hold := mtime.MaxTimestamp // a cleanup holds nothing
		if tm.Kind == core.Finalize {
			hold = mtime.Time(tm.At)
		}
		kb := []byte(k)
		a, err := b.s.onTimer(ctx, window.GlobalWindow{}, hold, sp, b.proc != nil, kb, "", emit)
		if err != nil {
			return nil, b.s.io.abort(err)
		}
		b.setTimer(t, kb, a.Timer)
	}
	return t, b.settle(ctx, t, sp)
}

// setTimer records a decision's timer for the key (an event-time cleanup
// clamped to the global window's end, as the per-key step sets it).
func (b *bucketed) setTimer(t *bucketTable, key []byte, tm core.Timer) {
	if tm.Kind == core.NoTimer || b.event == nil && b.proc == nil {
		return
	}
	if b.event != nil {
		tm = core.ClampToWindow(tm, int64(window.GlobalWindow{}.MaxTimestamp()))
	}
	t.setTimer(key, tm)
}

// settle ends an element of the bucket: without deferred writes, its
// changes are written now, through its provider.
func (b *bucketed) settle(ctx context.Context, t *bucketTable, sp state.Provider) error {
	if b.deferring() {
		return nil
	}
	if c := t.write(ctx, b.s.m); !c.none() {
		if err := b.s.io.write(sp, t.key, c); err != nil {
			return b.s.io.abort(err)
		}
	}
	return nil
}

// arm sets the bucket's timers for the times its keys' timers were set to.
// In processing time a firing decides every key due by the clock, so the
// bucket has one timer, set when its earliest key's comes before it
// (relative to the clock); one set earlier than needed fires, finds no key
// due and is set again. In event time a firing knows only its own time
// (the watermark is past it, by how much it cannot tell), so the bucket has
// a timer at each time a key's timer is at, tagged with it, holding the
// watermark there: a runner fires all those the watermark passed together,
// as it would the keys' own, and a firing decides the keys due by its time.
// A timer whose keys moved on fires and finds none due.
func (b *bucketed) arm(ctx context.Context, tp timers.Provider, t *bucketTable) {
	switch {
	case b.event != nil:
		for _, at := range t.newTimes {
			if t.times[at] {
				continue
			}
			tm := time.UnixMilli(at)
			b.event.Set(tp, tm, timers.WithTag(BucketTimerTag(at)), timers.WithOutputTimestamp(tm))
			t.times[at] = true
			b.s.m.timerSets.Inc(ctx, 1)
		}
	case b.proc != nil:
		at, ok := t.nextDue()
		if !ok || t.hasArmed && t.armed <= at {
			break
		}
		now := b.s.now(time.Now()).UnixMilli()
		b.proc.Set(tp, time.Now().Add(time.Duration(at-now)*time.Millisecond), timers.WithNoOutputTimestamp())
		t.armed, t.hasArmed = at, true
		b.s.m.timerSets.Inc(ctx, 1)
	}
	t.newTimes = t.newTimes[:0]
}

// BucketTimerTag is the tag of a bucket's event-time timer at at (unix
// milliseconds), the time its keys' timers are at (for the library's
// tests, which look into a bucket's timers).
func BucketTimerTag(at int64) string { return strconv.FormatInt(at, 36) }

// writeAll writes every table's changes, each through its provider.
func (b *bucketed) writeAll(ctx context.Context) error {
	keys := make([]string, 0, len(b.tables))
	for k := range b.tables {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		t := b.tables[k]
		if c := t.write(ctx, b.s.m); !c.none() {
			if err := b.s.io.write(t.sp, t.key, c); err != nil {
				return b.s.io.abort(err)
			}
		}
	}
	return nil
}

// finishBundle writes what the bundle changed and waits until every request
// is answered.
func (b *bucketed) finishBundle(ctx context.Context, emit, drop rowEmit) error {
	if b.deferring() {
		if err := b.writeAll(ctx); err != nil {
			return err
		}
	}
	b.forget()
	return b.s.finishBundle(ctx, emit, drop)
}

// BucketsUntimed is the runtime of a stateful DoFn that keeps state per
// bucket, with no timer family.
type BucketsUntimed struct {
	P Params
	b bucketed
}

// Init sets the step up on its cell: the DoFn's Setup.
func (u *BucketsUntimed) Init(cell *state.Bag[[]byte]) error { return u.b.setup(&u.P, cell) }

// Step is the step the DoFn drives, for the library's tests.
func (u *BucketsUntimed) Step() *Step { return &u.b.s }

func (u *BucketsUntimed) StartBundle(context.Context, rowEmit, rowEmit) { u.b.startBundle() }

func (u *BucketsUntimed) ProcessElement(ctx context.Context, sp state.Provider, key, rows []byte, emit, drop rowEmit) error {
	_, err := u.b.decide(ctx, sp, key, rows, emit, drop)
	return err
}

// FinishBundle writes the bundle's changes and waits until every state
// request of the bundle is answered.
func (u *BucketsUntimed) FinishBundle(ctx context.Context, emit, drop rowEmit) error {
	return u.b.finishBundle(ctx, emit, drop)
}

// BucketsTimed is the runtime of a stateful DoFn that keeps state per
// bucket, with a timer family: event time (finalization and cleanup) or
// processing time (cleanup).
type BucketsTimed struct {
	P Params
	b bucketed
}

// InitEvent sets the step up on its cell and event-time timer: the DoFn's
// Setup.
func (t *BucketsTimed) InitEvent(cell *state.Bag[[]byte], timer *timers.EventTime) error {
	t.b.event = timer
	return t.b.setup(&t.P, cell)
}

// InitProc sets the step up on its cell and processing-time timer: the
// DoFn's Setup.
func (t *BucketsTimed) InitProc(cell *state.Bag[[]byte], timer *timers.ProcessingTime) error {
	t.b.proc = timer
	return t.b.setup(&t.P, cell)
}

// Step is the step the DoFn drives, for the library's tests.
func (t *BucketsTimed) Step() *Step { return &t.b.s }

func (t *BucketsTimed) StartBundle(context.Context, rowEmit, rowEmit) { t.b.startBundle() }

func (t *BucketsTimed) ProcessElement(ctx context.Context, sp state.Provider, tp timers.Provider, key, rows []byte, emit, drop rowEmit) error {
	tbl, err := t.b.decide(ctx, sp, key, rows, emit, drop)
	if tbl != nil {
		t.b.arm(ctx, tp, tbl)
	}
	return err
}

func (t *BucketsTimed) OnTimer(ctx context.Context, ts beam.EventTime, sp state.Provider, tp timers.Provider, key []byte, _ timers.Context, emit, _ rowEmit) error {
	tbl, err := t.b.fire(ctx, ts, sp, key, emit)
	if tbl != nil {
		t.b.arm(ctx, tp, tbl)
	}
	return err
}

// FinishBundle writes the bundle's changes and waits until every state
// request of the bundle is answered.
func (t *BucketsTimed) FinishBundle(ctx context.Context, emit, drop rowEmit) error {
	return t.b.finishBundle(ctx, emit, drop)
}

package dedup

import (
	"bytes"
	"context"
	"fmt"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"

	"github.com/beamdedup/beamdedup/transforms/dedup/core"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// The merge expansion. On a bounded PCollection "first arrival" has no
// order to respect and processing time means nothing, while the earliest
// (or, for KeepLast, the latest) row per key is a plain minimum (maximum): a
// combine per key (lifted, so rows are pre-aggregated before the shuffle)
// needs no per-row state access, which on a portable runner costs a round
// trip per row. Which row a key keeps is core's order (core/order.go,
// Direction.Merge), the one the stateful rules use, with the encoded row
// standing in for arrival so that batch results are repeatable; where its
// rows went is the rules' Settle. The same merge serves window dedup.

// candidate is the merge's accumulator (core.Candidate), with its own
// coder.
type candidate = core.Candidate

// candidateMerge is Direction.Merge as a Beam combine (CombinePerKey).
type candidateMerge struct {
	Dir core.Direction
}

func (m candidateMerge) MergeAccumulators(a, b candidate) candidate { return m.Dir.Merge(a, b) }

// toCandidateFn turns each KV<K,V> row of a KV input (checked by
// keyPairsFn) into a one-row candidate, or with Local merges each key's
// rows within the bundle (see keyCandidatesFn).
type toCandidateFn struct {
	ValueType beam.EncodedType
	KeyType   beam.EncodedType
	Checks    columns // the row's columns, validated upstream
	Local     bool
	Merge     bundleMerge

	seq    []byte
	keyEnc beam.ElementEncoder
	keyBuf bytes.Buffer
}

// Emitters of the candidate steps of a KV input: keyed candidates and
// dropped rows.
type (
	candKVEmit = func(beam.EventTime, beam.T, candidate)
	dropKVEmit = func(beam.EventTime, beam.T, beam.V)
)

func (f *toCandidateFn) Setup() error {
	f.Merge.setup(f.ValueType.T) // its row encoder serves the per-row path too
	if f.Local {
		f.keyEnc = beam.NewElementEncoder(f.KeyType.T)
	}
	return f.Checks.setup(f.ValueType.T)
}

// StartBundle drops what a failed bundle may have left.
func (f *toCandidateFn) StartBundle(_ candKVEmit, _ dropKVEmit) {
	clear(f.Merge.best)
}

func (f *toCandidateFn) ProcessElement(ts beam.EventTime, key beam.T, row beam.V, emit candKVEmit, drop dropKVEmit) error {
	c, reason := f.Checks.check(ts, reflect.ValueOf(row), f.seq[:0])
	if reason != "" { // validated upstream
		return fmt.Errorf("dedup: row reached the combine with %s", reason)
	}
	if c.seq != nil {
		f.seq = c.seq
	}
	dropRow := func(ts beam.EventTime, row any) { drop(ts, key, row) }
	if f.Local {
		f.keyBuf.Reset()
		if err := f.keyEnc.Encode(key, &f.keyBuf); err != nil {
			return fmt.Errorf("dedup: encoding key: %w", err)
		}
		return f.Merge.add(f.keyBuf.Bytes(), key, ts, c, row, func() error { return f.flush(emit) }, dropRow)
	}
	m, err := f.Merge.single(c, row, dropRow)
	if err == nil {
		emit(ts, key, m) // a retraction's candidate too: it is counted
	}
	return err
}

func (f *toCandidateFn) flush(emit candKVEmit) error {
	return f.Merge.drain(func(_ string, b *localBest) { emit(b.ts, b.key, b.c) })
}

// FinishBundle emits what the bundle left in the map.
func (f *toCandidateFn) FinishBundle(emit candKVEmit, _ dropKVEmit) error {
	return f.flush(emit)
}

// rowEncoder makes one-row candidates.
type rowEncoder struct {
	enc beam.ElementEncoder
	buf bytes.Buffer
}

// encode returns row's encoding (the merge's tie-break and its shuffle
// form), a fresh slice.
func (r *rowEncoder) encode(row any) ([]byte, error) {
	r.buf.Reset()
	if err := r.enc.Encode(row, &r.buf); err != nil {
		return nil, fmt.Errorf("dedup: encoding row: %w", err)
	}
	return bytes.Clone(r.buf.Bytes()), nil
}

// fromCandidateFn emits each key's kept row, KV<key, row>, with its own
// timestamp and accounts for every row merged into it
// (core.Rules.Settle): the combine's last step.
type fromCandidateFn struct {
	ValueType beam.EncodedType
	KindCol   string // the column the kept row's kind (+I, or KeepLast's -D) is written into
	// Last accounts as KeepLast (the changelog's final row: inserted, or
	// deleted, the rest superseded) rather than as KeepFirst and window
	// dedup (one kept row and its duplicates).
	Last    bool
	Metrics string // the namespace of the transform's counters

	rules core.Rules
	kf    *rowspec.KindColumn
	dec   beam.ElementDecoder
	m     *metricSet
}

func (f *fromCandidateFn) Setup() error {
	f.rules = core.First{}
	if f.Last {
		f.rules = core.Last{}
	}
	f.dec = beam.NewElementDecoder(f.ValueType.T)
	f.m = newMetricSet(f.Metrics)
	var err error
	f.kf, err = optionalKind(f.ValueType.T, f.KindCol)
	return err
}

func (f *fromCandidateFn) ProcessElement(ctx context.Context, key beam.T, m candidate, emit rowEmit) error {
	row, ok, err := f.kept(ctx, m)
	if ok {
		emit(mtime.Time(m.TS), key, row)
	}
	return err
}

// kept settles a key's merged rows and decodes the kept row when it is
// emitted (ok), as +I, or as -D where KeepLast's key ends deleted.
func (f *fromCandidateFn) kept(ctx context.Context, m candidate) (any, bool, error) {
	s := f.rules.Settle(m)
	f.m.settlement(ctx, &s)
	if !s.Emit {
		return nil, false, nil
	}
	row, err := f.decode(m.Row)
	if err != nil {
		return nil, false, err
	}
	if f.kf != nil {
		row = f.kf.With(row, s.Kind)
	}
	return row, true, nil
}

// decode decodes an encoded row.
func (f *fromCandidateFn) decode(enc []byte) (any, error) {
	row, err := f.dec.Decode(bytes.NewReader(enc))
	if err != nil {
		return nil, fmt.Errorf("dedup: decoding kept row: %w", err)
	}
	return row, nil
}

// keyCandidatesFn is keyRowsFn and one-row candidates in one step, for
// struct rows on the merge and window expansions: one DoFn invocation per
// row fewer. With Local it merges each key's rows within the bundle
// (bundleMerge); its FinishBundle output lands in the global window, which
// is why Local needs globally windowed input.
type keyCandidatesFn struct {
	Rows  keyRowsFn
	Local bool
	Merge bundleMerge // its row encoder serves the per-row path too

	key []byte // the current row's key, reused
}

// candEmit emits a struct row's candidate under its encoded key.
type candEmit = func(beam.EventTime, []byte, candidate)

func (f *keyCandidatesFn) Setup() error {
	f.Merge.setup(f.Rows.RowType.T)
	return f.Rows.Setup()
}

// StartBundle drops what a failed bundle may have left.
func (f *keyCandidatesFn) StartBundle(_ context.Context, _ candEmit, _ deadEmit, _ dropEmit) {
	clear(f.Merge.best)
}

func (f *keyCandidatesFn) ProcessElement(ctx context.Context, ts beam.EventTime, row beam.T, emit candEmit, dead deadEmit, drop dropEmit) error {
	var dst []byte // a fresh key slice when it is emitted right away
	if f.Local {
		dst = f.key[:0]
	}
	a, ok := f.Rows.admit(ctx, dst, ts, row, dead)
	if !ok {
		return nil
	}
	dropRow := func(ts beam.EventTime, row any) { drop(ts, row) }
	if f.Local {
		f.key = a.key
		return f.Merge.add(a.key, nil, ts, a.checked, row, func() error { return f.flush(emit) }, dropRow)
	}
	c, err := f.Merge.single(a.checked, row, dropRow)
	if err == nil {
		emit(ts, a.key, c)
	}
	return err
}

func (f *keyCandidatesFn) flush(emit candEmit) error {
	return f.Merge.drain(func(k string, b *localBest) { emit(b.ts, []byte(k), b.c) })
}

// FinishBundle emits what the bundle left in the map.
func (f *keyCandidatesFn) FinishBundle(_ context.Context, emit candEmit, _ deadEmit, _ dropEmit) error {
	return f.flush(emit)
}

// mergeGroupFn merges a key's grouped candidates and emits the kept row,
// KV<key, row>; with Dropped it emits the row of every candidate that lost,
// and a kept row that is not emitted (KeepLast: a key that ends deleted).
// After the in-bundle merge a key has at most one candidate per bundle, so
// a GroupByKey replaces the lifted combine, whose per-row cache would only
// cost time.
type mergeGroupFn struct {
	Dir     core.Direction
	Dropped bool
	From    fromCandidateFn
}

func (f *mergeGroupFn) Setup() error { return f.From.Setup() }

func (f *mergeGroupFn) ProcessElement(ctx context.Context, key beam.T, cands func(*candidate) bool, emit, drop rowEmit) error {
	var m, next candidate
	for cands(&next) {
		keepNext := f.Dir.Keeps(m, next)
		lost := next
		if keepNext {
			lost = m
		}
		if f.Dropped && lost.Has {
			if err := f.drop(key, lost, drop); err != nil {
				return err
			}
		}
		m = f.Dir.Merge(m, next)
	}
	row, ok, err := f.From.kept(ctx, m)
	switch {
	case err != nil:
		return err
	case ok:
		emit(mtime.Time(m.TS), key, row)
	case f.Dropped && m.Has:
		return f.drop(key, m, drop)
	}
	return nil
}

// drop emits the row of candidate c, at its time.
func (f *mergeGroupFn) drop(key any, c candidate, drop rowEmit) error {
	row, err := f.From.decode(c.Row)
	if err == nil {
		drop(mtime.Time(c.TS), key, row)
	}
	return err
}

// merge builds the merge expansion (bounded input) and window dedup: key
// each row (merged within the bundle with localMerge) as a candidate, then
// merge each key's candidates with a combine the runner lifts, or with a
// GroupByKey and mergeGroupFn when the plan is grouped.
func (b *builder) merge(col beam.PCollection) Result {
	p := b.p
	vt := b.sh.rowType
	merge := bundleMerge{Dir: p.dir, Dropped: p.dropped}
	var cands, dead, early beam.PCollection
	switch {
	case b.sh.kv:
		var keyed beam.PCollection
		keyed, dead = beam.ParDo2(b.s.Scope("Key"), b.keyPairs(), col)
		checks := b.c.rowChecks()
		cands, early = beam.ParDo2(b.s.Scope("Candidates"), &toCandidateFn{
			ValueType: beam.EncodedType{T: vt}, KeyType: beam.EncodedType{T: b.sh.keyType}, Checks: checks, Local: p.localMerge, Merge: merge,
		}, keyed)
	case p.expansion == windowExpansion:
		cands, dead, early = beam.ParDo3(b.s.Scope("Key"), &windowKeyFn{keyCandidatesFn{Rows: b.keyRows(), Merge: merge}}, col)
	default:
		cands, dead, early = beam.ParDo3(b.s.Scope("Key"), &keyCandidatesFn{Rows: b.keyRows(), Local: p.localMerge, Merge: merge}, col)
	}
	from := fromCandidateFn{ValueType: beam.EncodedType{T: vt}, KindCol: b.c.kindCol, Last: p.last, Metrics: b.metrics}
	out := beam.TypeDefinition{Var: beam.VType, T: vt}
	var kept, lost beam.PCollection
	if p.grouped {
		s := b.s.Scope("Merge")
		kept, lost = beam.ParDo2(s, &mergeGroupFn{Dir: p.dir, Dropped: p.dropped, From: from}, beam.GroupByKey(s, cands), out)
	} else {
		s := b.s.Scope("Combine")
		kept = beam.ParDo(s, &from, beam.CombinePerKey(s, candidateMerge{Dir: p.dir}, cands), out)
	}
	rows := b.dropKey("DropKey", kept)
	if !p.dropped {
		return Result{Rows: rows, DeadLetters: dead}
	}
	return b.result(rows, dead, early, b.dropKey("DropKeyDropped", lost))
}

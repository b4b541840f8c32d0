package step

import (
	"bytes"
	"context"
	"fmt"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"

	"github.com/beamdedup/beamdedup/internal/rowcol"
	"github.com/beamdedup/beamdedup/transforms/dedup/internal/core"
)

// The DoFns of the merge expansion and of window dedup. On a bounded
// PCollection "first arrival" has no order to respect and processing time
// means nothing, while the earliest (or, for KeepLast, the latest) row per
// key is a plain minimum (maximum): a combine per key (lifted, so rows are
// pre-aggregated before the shuffle) needs no per-row state access, which
// on a portable runner costs a round trip per row. Which row a key keeps is core's order (core/order.go,
// Direction.Merge), the one the stateful rules use, with the encoded row
// standing in for arrival so that batch results are repeatable; where its
// rows went is the rules' Settle. The same merge serves window dedup.

// CandidateMerge is Direction.Merge as a Beam combine (CombinePerKey).
type CandidateMerge struct {
	Dir core.Direction
}

func (m CandidateMerge) MergeAccumulators(a, b candidate) candidate { return m.Dir.Merge(a, b) }

// ToCandidate turns each KV<K,V> row of a KV input (checked by
// KeyPairs) into a one-row candidate, or with Local merges each key's
// rows within the bundle (see KeyCandidates).
type ToCandidate struct {
	ValueType beam.EncodedType
	KeyType   beam.EncodedType
	Checks    Columns // the row's columns, validated upstream
	Local     bool
	Merge     BundleMerge

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

func (f *ToCandidate) Setup() error {
	f.Merge.setup(f.ValueType.T) // its row encoder serves the per-row path too
	if f.Local {
		f.keyEnc = beam.NewElementEncoder(f.KeyType.T)
	}
	return f.Checks.Setup(f.ValueType.T)
}

// StartBundle drops what a failed bundle may have left.
func (f *ToCandidate) StartBundle(_ candKVEmit, _ dropKVEmit) {
	clear(f.Merge.best)
}

func (f *ToCandidate) ProcessElement(ts beam.EventTime, key beam.T, row beam.V, emit candKVEmit, drop dropKVEmit) error {
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

func (f *ToCandidate) flush(emit candKVEmit) error {
	return f.Merge.drain(func(_ string, b *localBest) { emit(b.ts, b.key, b.c) })
}

// FinishBundle emits what the bundle left in the map.
func (f *ToCandidate) FinishBundle(emit candKVEmit, _ dropKVEmit) error {
	return f.flush(emit)
}

// FromCandidate emits each key's kept row, KV<key, row>, with its own
// timestamp and accounts for every row merged into it
// (core.Rules.Settle): the combine's last step.
type FromCandidate struct {
	ValueType beam.EncodedType
	KindCol   string // the column the kept row's kind (+I, or KeepLast's -D) is written into
	// Last accounts as KeepLast (the changelog's final row: inserted, or
	// deleted, the rest superseded) rather than as KeepFirst and window
	// dedup (one kept row and its duplicates).
	Last    bool
	Metrics string // the namespace of the transform's counters

	rules core.Rules
	kf    *rowcol.KindColumn
	dec   beam.ElementDecoder
	m     *metricSet
}

func (f *FromCandidate) Setup() error {
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

func (f *FromCandidate) ProcessElement(ctx context.Context, key beam.T, m candidate, emit rowEmit) error {
	row, ok, err := f.kept(ctx, m)
	if ok {
		emit(mtime.Time(m.TS), key, row)
	}
	return err
}

// kept settles a key's merged rows and decodes the kept row when it is
// emitted (ok), as +I, or as -D where KeepLast's key ends deleted.
func (f *FromCandidate) kept(ctx context.Context, m candidate) (any, bool, error) {
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
func (f *FromCandidate) decode(enc []byte) (any, error) {
	row, err := f.dec.Decode(bytes.NewReader(enc))
	if err != nil {
		return nil, fmt.Errorf("dedup: decoding kept row: %w", err)
	}
	return row, nil
}

// KeyCandidates is KeyRows and one-row candidates in one step, for
// struct rows on the merge and window expansions: one DoFn invocation per
// row fewer. With Local it merges each key's rows within the bundle
// (BundleMerge); its FinishBundle output lands in the global window, which
// is why Local needs globally windowed input.
type KeyCandidates struct {
	Rows  KeyRows
	Local bool
	Merge BundleMerge // its row encoder serves the per-row path too

	key []byte // the current row's key, reused
}

// candEmit emits a struct row's candidate under its encoded key.
type candEmit = func(beam.EventTime, []byte, candidate)

func (f *KeyCandidates) Setup() error {
	f.Merge.setup(f.Rows.RowType.T)
	return f.Rows.Setup()
}

// StartBundle drops what a failed bundle may have left.
func (f *KeyCandidates) StartBundle(_ context.Context, _ candEmit, _ deadEmit, _ dropEmit) {
	clear(f.Merge.best)
}

func (f *KeyCandidates) ProcessElement(ctx context.Context, ts beam.EventTime, row beam.T, emit candEmit, dead deadEmit, drop dropEmit) error {
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

func (f *KeyCandidates) flush(emit candEmit) error {
	return f.Merge.drain(func(k string, b *localBest) { emit(b.ts, []byte(k), b.c) })
}

// FinishBundle emits what the bundle left in the map.
func (f *KeyCandidates) FinishBundle(_ context.Context, emit candEmit, _ deadEmit, _ dropEmit) error {
	return f.flush(emit)
}

// MergeGroup merges a key's grouped candidates and emits the kept row,
// KV<key, row>; with Dropped it emits the row of every candidate that lost,
// and a kept row that is not emitted (KeepLast: a key that ends deleted).
// After the in-bundle merge a key has at most one candidate per bundle, so
// a GroupByKey replaces the lifted combine, whose per-row cache would only
// cost time.
type MergeGroup struct {
	Dir     core.Direction
	Dropped bool
	From    FromCandidate
}

func (f *MergeGroup) Setup() error { return f.From.Setup() }

func (f *MergeGroup) ProcessElement(ctx context.Context, key beam.T, cands func(*candidate) bool, emit, drop rowEmit) error {
	var m, next candidate
	for cands(&next) {
		if err := f.add(key, &m, next, drop); err != nil {
			return err
		}
	}
	return f.settle(ctx, key, m, emit, drop)
}

// add merges candidate next of key into m (Direction.Merge); with Dropped
// the row of the one that loses goes to drop.
func (f *MergeGroup) add(key any, m *candidate, next candidate, drop rowEmit) error {
	lost := next
	if f.Dir.Keeps(*m, next) {
		lost = *m
	}
	if f.Dropped && lost.Has {
		if err := f.drop(key, lost, drop); err != nil {
			return err
		}
	}
	*m = f.Dir.Merge(*m, next)
	return nil
}

// settle emits key's kept row, m's, and accounts for every row merged into
// it (FromCandidate); with Dropped a kept row that is not emitted goes to
// drop.
func (f *MergeGroup) settle(ctx context.Context, key any, m candidate, emit, drop rowEmit) error {
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
func (f *MergeGroup) drop(key any, c candidate, drop rowEmit) error {
	row, err := f.From.decode(c.Row)
	if err == nil {
		drop(mtime.Time(c.TS), key, row)
	}
	return err
}

// WindowKey is KeyCandidates (one candidate per row, no in-bundle merge,
// whose FinishBundle output would lose the window) observing the window,
// so the SDK hands it a row once per window: rows_in then counts a row of
// a sliding window once per window, as emitted and duplicates_dropped do.
type WindowKey struct {
	KeyCandidates
}

func (f *WindowKey) ProcessElement(ctx context.Context, _ beam.Window, ts beam.EventTime, row beam.T, emit candEmit, dead deadEmit, drop dropEmit) error {
	return f.KeyCandidates.ProcessElement(ctx, ts, row, emit, dead, drop)
}

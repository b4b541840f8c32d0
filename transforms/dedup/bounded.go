package dedup

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"

	"github.com/beamdedup/beamdedup/transforms/deadletter"
	"github.com/beamdedup/beamdedup/transforms/dedup/core"
)

// The bounded expansion. On a bounded PCollection "first arrival" has no
// order to respect and processing time means nothing, while the earliest
// (or, for KeepLast, the latest) row per key is a plain minimum (maximum): a
// combine per key (lifted, so rows are pre-aggregated before the shuffle)
// needs no per-row state access, which on Prism costs a gRPC round trip per
// row. The kept row per key (and window) is the one with the smallest (or
// largest) ordering value (SequenceBy), then timestamp, ties broken by the
// smaller (or larger) encoded row, so batch results are repeatable. The
// same merge serves window dedup.

// direction says which end of the order a merge keeps.
type direction uint8

const (
	dirFirst direction = iota // the smallest (seq, timestamp, encoded row)
	dirLast                   // the largest
)

// candidate is the accumulator: the best row seen so far and the counts of
// the rows merged into it.
type candidate struct {
	Has         bool   // a row is present (a +I/+U row; with dirLast, a -U/-D too)
	Retract     bool   // dirLast: the kept row is a -U/-D (the key ends deleted)
	TS          int64  // its timestamp (event time), Unix ms
	Seq         []byte // its SequenceBy value (coders/ordercoder); nil without SequenceBy
	Row         []byte // it, encoded with the row's coder
	Rows        int64  // +I/+U rows merged
	Retractions int64  // -U/-D rows merged
}

// Flags of the candidate's first byte.
const (
	candHas = 1 << iota
	candSeq
	candRetract
)

// encodeCandidate and decodeCandidate are candidate's coder: the lifted
// combine re-encodes accumulators, and Beam's reflective row coder cost 6%
// of the bounded expansion's CPU (notes/performance.md). Layout: a flags
// byte, varints TS, Rows, Retractions, then (if flagged) uvarint length and
// Seq, then the Row to the end. Candidates are never persisted in state.
func encodeCandidate(c candidate) []byte {
	b := make([]byte, 0, 1+4*binary.MaxVarintLen64+len(c.Seq)+len(c.Row))
	var flags byte
	if c.Has {
		flags |= candHas
	}
	if c.Seq != nil {
		flags |= candSeq
	}
	if c.Retract {
		flags |= candRetract
	}
	b = append(b, flags)
	b = binary.AppendVarint(b, c.TS)
	b = binary.AppendVarint(b, c.Rows)
	b = binary.AppendVarint(b, c.Retractions)
	if c.Seq != nil {
		b = binary.AppendUvarint(b, uint64(len(c.Seq)))
		b = append(b, c.Seq...)
	}
	return append(b, c.Row...)
}

func decodeCandidate(b []byte) (candidate, error) {
	if len(b) < 1 || b[0]&^(candHas|candSeq|candRetract) != 0 {
		return candidate{}, fmt.Errorf("dedup: corrupt candidate")
	}
	c := candidate{Has: b[0]&candHas != 0, Retract: b[0]&candRetract != 0}
	seq := b[0]&candSeq != 0
	b = b[1:]
	for _, p := range []*int64{&c.TS, &c.Rows, &c.Retractions} {
		v, n := binary.Varint(b)
		if n <= 0 {
			return candidate{}, fmt.Errorf("dedup: corrupt candidate")
		}
		*p, b = v, b[n:]
	}
	if seq {
		l, n := binary.Uvarint(b)
		if n <= 0 || l > uint64(len(b)-n) {
			return candidate{}, fmt.Errorf("dedup: corrupt candidate")
		}
		c.Seq, b = b[n:n+int(l):n+int(l)], b[n+int(l):]
	}
	if len(b) > 0 {
		c.Row = b
	}
	return c, nil
}

// compareOrder orders two present rows by (seq, timestamp, kind, encoded
// row): a -U/-D sorts before a +I/+U at the same seq and time, so that a
// -U/+U pair of one instant ends with the +U.
func compareOrder(a, b candidate) int {
	if c := bytes.Compare(a.Seq, b.Seq); c != 0 {
		return c
	}
	if c := cmp.Compare(a.TS, b.TS); c != 0 {
		return c
	}
	if a.Retract != b.Retract {
		if a.Retract {
			return -1
		}
		return 1
	}
	return bytes.Compare(a.Row, b.Row)
}

// mergeCandidates keeps the smaller (dirFirst) or larger (dirLast) row by
// compareOrder and adds up the counts. It is commutative and associative,
// as a combine needs.
func mergeCandidates(dir direction, a, b candidate) candidate {
	keep := a
	if !a.Has || b.Has && dir.prefers(compareOrder(b, a)) {
		keep = b
	}
	keep.Rows = a.Rows + b.Rows
	keep.Retractions = a.Retractions + b.Retractions
	return keep
}

// prefers reports whether a row that compares c against the kept one
// replaces it.
func (d direction) prefers(c int) bool {
	if d == dirLast {
		return c > 0
	}
	return c < 0
}

// candidateMerge is mergeCandidates as a Beam combine (CombinePerKey).
type candidateMerge struct {
	Dir direction
}

func (m candidateMerge) MergeAccumulators(a, b candidate) candidate {
	return mergeCandidates(m.Dir, a, b)
}

// toCandidateFn turns each keyed row into a one-row candidate, or with
// Local merges each key's rows within the bundle (see keyCandidatesFn).
type toCandidateFn struct {
	ValueType beam.EncodedType
	KeyType   beam.EncodedType
	KindCol   string
	SeqCol    string // SequenceBy, validated upstream
	Local     bool
	Merge     bundleMerge

	kf     *kindField
	sf     *seqField
	seq    []byte
	keyEnc beam.ElementEncoder
	keyBuf bytes.Buffer
}

func (f *toCandidateFn) Setup() error {
	f.Merge.setup(f.ValueType.T) // its row encoder serves the per-row path too
	if f.Local {
		f.keyEnc = beam.NewElementEncoder(f.KeyType.T)
	}
	var err error
	if f.kf, err = optionalKindField(f.ValueType.T, f.KindCol); err != nil {
		return err
	}
	f.sf, err = optionalSeqField(f.ValueType.T, f.SeqCol)
	return err
}

// StartBundle drops what a failed bundle may have left.
func (f *toCandidateFn) StartBundle(_ func(beam.EventTime, beam.T, candidate)) {
	clear(f.Merge.best)
}

func (f *toCandidateFn) ProcessElement(ts beam.EventTime, key beam.T, row beam.V, emit func(beam.EventTime, beam.T, candidate)) error {
	retraction := false
	v := reflect.ValueOf(row)
	if f.kf != nil {
		k, reason := f.kf.kind(v)
		if reason != "" { // validated upstream
			return fmt.Errorf("dedup: row reached the combine with %s", reason)
		}
		retraction = k.IsRetraction()
	}
	var seq []byte
	if f.sf != nil {
		var reason string
		if f.seq, reason = f.sf.appendTo(f.seq[:0], v); reason != "" { // validated upstream
			return fmt.Errorf("dedup: row reached the combine with %s", reason)
		}
		seq = f.seq
	}
	if f.Local {
		f.keyBuf.Reset()
		if err := f.keyEnc.Encode(key, &f.keyBuf); err != nil {
			return fmt.Errorf("dedup: encoding key: %w", err)
		}
		return f.Merge.add(f.keyBuf.Bytes(), key, ts, ts, seq, retraction, row, func() error { return f.flush(emit) })
	}
	c, err := f.Merge.single(ts, seq, retraction, row)
	if err == nil {
		emit(ts, key, c)
	}
	return err
}

func (f *toCandidateFn) flush(emit func(beam.EventTime, beam.T, candidate)) error {
	return f.Merge.drain(func(_ string, b *localBest) { emit(b.ts, b.key, b.c) })
}

// FinishBundle emits what the bundle left in the map.
func (f *toCandidateFn) FinishBundle(emit func(beam.EventTime, beam.T, candidate)) error {
	return f.flush(emit)
}

// rowEncoder makes one-row candidates.
type rowEncoder struct {
	enc beam.ElementEncoder
	buf bytes.Buffer
}

// encode returns row's encoding (the combine's tie-break and its shuffle
// form), a fresh slice.
func (r *rowEncoder) encode(row any) ([]byte, error) {
	r.buf.Reset()
	if err := r.enc.Encode(row, &r.buf); err != nil {
		return nil, fmt.Errorf("dedup: encoding row: %w", err)
	}
	return bytes.Clone(r.buf.Bytes()), nil
}

// fromCandidateFn emits each key's kept row with its own timestamp and
// accounts for every row merged into it.
type fromCandidateFn struct {
	ValueType beam.EncodedType
	KindCol   string
	Dir       direction
	// Last accounts as KeepLast (the changelog's final row: inserted, the
	// rest superseded) rather than as one kept row and its duplicates.
	Last bool
	kf   *kindField
	dec  beam.ElementDecoder
}

func (f *fromCandidateFn) Setup() error {
	f.dec = beam.NewElementDecoder(f.ValueType.T)
	var err error
	f.kf, err = optionalKindField(f.ValueType.T, f.KindCol)
	return err
}

func (f *fromCandidateFn) ProcessElement(ctx context.Context, key beam.T, c candidate, emit func(beam.EventTime, beam.T, beam.V)) error {
	row, ok, err := f.kept(ctx, c)
	if ok {
		emit(mtime.Time(c.TS), key, row)
	}
	return err
}

// kept decodes a key's kept row and counts every row merged into it; ok is
// false for a key that had only retractions.
func (f *fromCandidateFn) kept(ctx context.Context, c candidate) (any, bool, error) {
	if f.Last {
		return f.keptLast(ctx, c)
	}
	if !c.Has {
		// Only retractions for this key: ignored, the key is not seen.
		cOutcome[core.IgnoreRetraction].Inc(ctx, c.Retractions)
		return nil, false, nil
	}
	cOutcome[core.Swallow].Inc(ctx, c.Retractions)
	cOutcome[core.DropDuplicate].Inc(ctx, c.Rows-1)
	row, err := f.dec.Decode(bytes.NewReader(c.Row))
	if err != nil {
		return nil, false, fmt.Errorf("dedup: decoding kept row: %w", err)
	}
	if f.kf != nil {
		row = f.kf.asInsert(row)
	}
	cOutcome[core.Emit].Inc(ctx, 1)
	return row, true, nil
}

// keptLast is kept for KeepLast: the key's last row, emitted as +I (the
// changelog collapsed to its final state), or nothing when the last row is a
// retraction. Every other row merged into it was superseded.
func (f *fromCandidateFn) keptLast(ctx context.Context, c candidate) (any, bool, error) {
	if !c.Has {
		return nil, false, nil
	}
	cSuperseded.Inc(ctx, c.Rows+c.Retractions-1)
	if c.Retract {
		cOutcome[core.IgnoreRetraction].Inc(ctx, 1) // it deletes a row never emitted
		return nil, false, nil
	}
	row, err := f.dec.Decode(bytes.NewReader(c.Row))
	if err != nil {
		return nil, false, fmt.Errorf("dedup: decoding kept row: %w", err)
	}
	if f.kf != nil {
		row = f.kf.asInsert(row)
	}
	cLastOutcome[core.Inserted].Inc(ctx, 1)
	return row, true, nil
}

// fromCandidateRowFn is fromCandidateFn for KeepFirst: it emits the row
// alone, saving a DropKey step per key.
type fromCandidateRowFn struct {
	From fromCandidateFn
}

func (f *fromCandidateRowFn) Setup() error { return f.From.Setup() }

func (f *fromCandidateRowFn) ProcessElement(ctx context.Context, _ []byte, c candidate, emit func(beam.EventTime, beam.V)) error {
	row, ok, err := f.From.kept(ctx, c)
	if ok {
		emit(mtime.Time(c.TS), row)
	}
	return err
}

// bundleMerge does the combine's work within a bundle (MiniBatch on
// bounded, globally windowed input): it keeps each key's best row unencoded
// in a map, merged exactly as mergeCandidates would merge it, and hands out
// one candidate per key when the bundle ends or the map is full. That
// spares the encoding of every row that loses within its bundle, a
// candidate per row through the lifted combine, whose cache holds only
// 2,000 keys, and so most of the shuffle.
type bundleMerge struct {
	MaxKeys int       // keys held per bundle before a flush; 0: miniBatchMaxKeys
	Dir     direction // which row per key is kept

	rows rowEncoder
	best map[string]*localBest
	tie  bytes.Buffer
}

// localBest is a key's best row within a bundle, as a candidate whose row
// is encoded only when needed (a tie, or the flush).
type localBest struct {
	c   candidate // Row is nil until encoded
	row any
	key any            // the key to emit, when it is not the map key
	ts  beam.EventTime // element time for the flush
}

func (m *bundleMerge) setup(rowType reflect.Type) {
	m.rows.enc = beam.NewElementEncoder(rowType)
	m.best = make(map[string]*localBest)
}

// single is the candidate of one row: with dirFirst a retraction only
// counts; otherwise the row competes. seq is copied.
func (m *bundleMerge) single(ts beam.EventTime, seq []byte, retraction bool, row any) (candidate, error) {
	if retraction && m.Dir == dirFirst {
		return candidate{Retractions: 1}, nil
	}
	enc, err := m.rows.encode(row)
	if err != nil {
		return candidate{}, err
	}
	c := candidate{Has: true, Retract: retraction, TS: int64(ts), Seq: bytes.Clone(seq), Row: enc, Rows: 1}
	if retraction {
		c.Rows, c.Retractions = 0, 1
	}
	return c, nil
}

// add merges a row of key (retraction or not, event time et, SequenceBy
// value seq or nil, element time ts) into the key's entry; a new key first
// flushes a full map. seq is copied when kept.
func (m *bundleMerge) add(key []byte, emitKey any, ts, et beam.EventTime, seq []byte, retraction bool, row any, flush func() error) error {
	b := m.best[string(key)] // no allocation for the lookup
	if b == nil {
		if len(m.best) >= cmp.Or(m.MaxKeys, miniBatchMaxKeys) {
			if err := flush(); err != nil {
				return err
			}
		}
		b = &localBest{key: emitKey, ts: ts}
		m.best[string(key)] = b
	}
	if retraction {
		b.c.Retractions++
		if m.Dir == dirFirst {
			return nil // only counted: a retraction never becomes the first row
		}
	} else {
		b.c.Rows++
	}
	better, err := m.beats(b, int64(et), seq, retraction, row)
	if err != nil || !better {
		return err
	}
	b.c.Has, b.c.Retract, b.c.TS, b.row, b.ts = true, retraction, int64(et), row, ts
	b.c.Seq = append(b.c.Seq[:0], seq...)
	if seq == nil {
		b.c.Seq = nil
	}
	if m.tie.Len() > 0 { // the tie-break encoded it: keep that
		b.c.Row = bytes.Clone(m.tie.Bytes())
	} else {
		b.c.Row = nil
	}
	return nil
}

// beats reports whether a row (event time et, SequenceBy value seq) is kept
// over b's, by mergeCandidates' order. Only a tie on everything but the row
// encodes, leaving the new row's encoding in m.tie.
func (m *bundleMerge) beats(b *localBest, et int64, seq []byte, retraction bool, row any) (bool, error) {
	m.tie.Reset()
	if !b.c.Has {
		return true, nil
	}
	if c := compareOrder(candidate{Seq: seq, TS: et, Retract: retraction}, candidate{Seq: b.c.Seq, TS: b.c.TS, Retract: b.c.Retract}); c != 0 {
		return m.Dir.prefers(c), nil
	}
	if b.c.Row == nil {
		enc, err := m.rows.encode(b.row)
		if err != nil {
			return false, err
		}
		b.c.Row = enc
	}
	if err := m.rows.enc.Encode(row, &m.tie); err != nil {
		return false, fmt.Errorf("dedup: encoding row: %w", err)
	}
	return m.Dir.prefers(bytes.Compare(m.tie.Bytes(), b.c.Row)), nil
}

// drain passes each key's candidate to emit and empties the map.
func (m *bundleMerge) drain(emit func(key string, b *localBest)) error {
	for k, b := range m.best {
		if b.c.Has && b.c.Row == nil {
			enc, err := m.rows.encode(b.row)
			if err != nil {
				return err
			}
			b.c.Row = enc
		}
		emit(k, b)
	}
	clear(m.best)
	return nil
}

// keyCandidatesFn is keyRowsFn and toCandidateFn in one step, for
// KeepFirst on bounded input: one DoFn invocation per row fewer. With Local
// it merges each key's rows within the bundle (bundleMerge); its
// FinishBundle output lands in the global window, which is why Local needs
// globally windowed input.
type keyCandidatesFn struct {
	Rows  keyRowsFn
	Local bool
	Merge bundleMerge // its row encoder serves the per-row path too

	key []byte // the current row's key, reused
}

func (f *keyCandidatesFn) Setup() error {
	f.Merge.setup(f.Rows.RowType.T)
	return f.Rows.Setup()
}

// StartBundle drops what a failed bundle may have left.
func (f *keyCandidatesFn) StartBundle(_ context.Context, _ func(beam.EventTime, []byte, candidate), _ func(deadletter.DeadLetter)) {
	clear(f.Merge.best)
}

func (f *keyCandidatesFn) ProcessElement(ctx context.Context, ts beam.EventTime, row beam.T, emit func(beam.EventTime, []byte, candidate), dead func(deadletter.DeadLetter)) error {
	var dst []byte // a fresh key slice when it is emitted right away
	if f.Local {
		dst = f.key[:0]
	}
	key, ets, kind, ok := f.Rows.admit(ctx, dst, ts, row, dead)
	if !ok {
		return nil
	}
	seq := f.Rows.Checks.seq // admit read it; nil without SequenceBy
	if f.Local {
		f.key = key
		return f.Merge.add(key, nil, ts, ets, seq, kind.IsRetraction(), row, func() error { return f.flush(emit) })
	}
	c, err := f.Merge.single(ets, seq, kind.IsRetraction(), row)
	if err == nil {
		emit(ts, key, c)
	}
	return err
}

func (f *keyCandidatesFn) flush(emit func(beam.EventTime, []byte, candidate)) error {
	return f.Merge.drain(func(k string, b *localBest) { emit(b.ts, []byte(k), b.c) })
}

// FinishBundle emits what the bundle left in the map.
func (f *keyCandidatesFn) FinishBundle(_ context.Context, emit func(beam.EventTime, []byte, candidate), _ func(deadletter.DeadLetter)) error {
	return f.flush(emit)
}

// mergeGroupFn merges a key's grouped candidates and emits the kept row:
// after the in-bundle merge a key has at most one candidate per bundle, so
// a GroupByKey replaces the lifted combine, whose per-row cache would only
// cost time.
type mergeGroupFn struct {
	From fromCandidateFn
}

func (f *mergeGroupFn) Setup() error { return f.From.Setup() }

func (f *mergeGroupFn) ProcessElement(ctx context.Context, _ []byte, cands func(*candidate) bool, emit func(beam.EventTime, beam.V)) error {
	var c, next candidate
	for cands(&next) {
		c = mergeCandidates(f.From.Dir, c, next)
	}
	row, ok, err := f.From.kept(ctx, c)
	if ok {
		emit(mtime.Time(c.TS), row)
	}
	return err
}

// boundedRows is the whole bounded expansion of KeepFirst: key (and merge
// within the bundle), then a combine per key, or a GroupByKey and a merge.
func boundedRows(s beam.Scope, rows beam.PCollection, kr keyRowsFn, c *config) (kept, dead beam.PCollection) {
	local, dir := localMerge(c, rows), c.dir()
	cands, dead := beam.ParDo2(s.Scope("Key"), &keyCandidatesFn{Rows: kr, Local: local, Merge: bundleMerge{Dir: dir}}, rows)
	from := fromCandidateFn{ValueType: kr.RowType, KindCol: c.kindColumn(), Dir: dir, Last: c.last}
	out := beam.TypeDefinition{Var: beam.VType, T: kr.RowType.T}
	if local {
		s = s.Scope("Merge")
		return beam.ParDo(s, &mergeGroupFn{From: from}, beam.GroupByKey(s, cands), out), dead
	}
	return combineRows(s, cands, from), dead
}

// combineRows keeps one row per key (and window) of cands, keyed
// candidates, with a combine the runner lifts, and emits it alone.
func combineRows(s beam.Scope, cands beam.PCollection, from fromCandidateFn) beam.PCollection {
	s = s.Scope("Combine")
	best := beam.CombinePerKey(s, candidateMerge{Dir: from.Dir}, cands)
	return beam.ParDo(s, &fromCandidateRowFn{From: from}, best, beam.TypeDefinition{Var: beam.VType, T: from.ValueType.T})
}

// mergeGroupKVFn is mergeGroupFn for KeepFirstPerKey: it emits the key too.
type mergeGroupKVFn struct {
	From fromCandidateFn
}

func (f *mergeGroupKVFn) Setup() error { return f.From.Setup() }

func (f *mergeGroupKVFn) ProcessElement(ctx context.Context, key beam.T, cands func(*candidate) bool, emit func(beam.EventTime, beam.T, beam.V)) error {
	var c, next candidate
	for cands(&next) {
		c = mergeCandidates(f.From.Dir, c, next)
	}
	return f.From.ProcessElement(ctx, key, c, emit)
}

// boundedStep is the state-free expansion of the keyed step: as
// boundedRows, for KV input.
func boundedStep(s beam.Scope, keyed beam.PCollection, c *config, vt reflect.Type) beam.PCollection {
	local, dir := localMerge(c, keyed), c.dir()
	kt := beam.EncodedType{T: keyed.Type().Components()[0].Type()}
	vtE := beam.EncodedType{T: vt}
	cands := beam.ParDo(s.Scope("Candidates"), &toCandidateFn{ValueType: vtE, KeyType: kt, KindCol: c.changelogCol, SeqCol: c.sequenceBy, Local: local, Merge: bundleMerge{Dir: dir}}, keyed)
	from := fromCandidateFn{ValueType: vtE, KindCol: c.kindColumn(), Dir: dir, Last: c.last}
	out := beam.TypeDefinition{Var: beam.VType, T: vt}
	if local {
		s = s.Scope("Merge")
		return beam.ParDo(s, &mergeGroupKVFn{From: from}, beam.GroupByKey(s, cands), out)
	}
	s = s.Scope("Combine")
	best := beam.CombinePerKey(s, candidateMerge{Dir: dir}, cands)
	return beam.ParDo(s, &from, best, out)
}

// localMerge reports whether the bounded expansion of col merges each key's
// rows within the bundle and groups them with a GroupByKey (MiniBatch, and
// global windows: FinishBundle output lands in the global window), rather
// than using a lifted combine.
func localMerge(c *config, col beam.PCollection) bool {
	return !c.noMiniBatch && col.WindowingStrategy().Fn.Kind == window.GlobalWindows
}

// useBounded reports whether the combine expansion applies: bounded input,
// not forced stateful, and no event-time retention (which splits a key's
// rows into periods, which a single minimum cannot express).
func useBounded(c *config, bounded bool) bool {
	return bounded && !c.forceStateful && c.eventTTL == 0
}

package dedup

import "github.com/apache/beam/sdks/v2/go/pkg/beam"

// KeepLast keeps the last row per key of rows and returns a changelog of
// the same type: a key's first row as +I, each replacement as -U (the
// previous row) then +U (the new one), a deletion as -D, with the kind
// written into the KindColumn. Without OnTime or SequenceBy the last row is
// the last to arrive; with them, the one with the largest value (ties: the
// later arrival). A row equal to the stored one in every column but the
// kind emits nothing. On bounded input the result is each key's final row,
// as +I. It panics on a construction error (see TryKeepLast).
func KeepLast(s beam.Scope, rows beam.PCollection, opts ...Option) Result {
	return must(TryKeepLast(s, rows, opts...))
}

// TryKeepLast is KeepLast returning construction errors instead of
// panicking.
func TryKeepLast(s beam.Scope, rows beam.PCollection, opts ...Option) (Result, error) {
	return build(s, rows, opts, keepLast)
}

// stateful builds the stateful expansion: the keying step (with
// KeepFirst's pre-filter or KeepLast's fold), then the stateful step.
func (b *builder) stateful(col beam.PCollection) Result {
	p, vt := b.p, b.sh.rowType
	if b.sh.kv {
		keyed, dead := beam.ParDo2(b.s.Scope("Key"), b.keyPairs(), col)
		kept, dropped := statefulStep(b.s, keyed, b.c, p, vt, b.metrics)
		return b.result(kept, dead, dropped)
	}
	kr := b.keyRows()
	kr.PreFilter, kr.Rules = p.preFilter, p.rules
	var keyFn any = &kr
	if p.fold {
		keyFn = &foldRowsFn{Rows: kr}
	}
	keyed, dead, early := beam.ParDo3(b.s.Scope("Key"), keyFn, col)
	kept, dropped := statefulStep(b.s, keyed, b.c, p, vt, b.metrics)
	rows := beam.DropKey(b.s.Scope("DropKey"), kept)
	if !p.dropped {
		return Result{Rows: rows, DeadLetters: dead}
	}
	return b.result(rows, dead, early, b.dropKey("DropKeyDropped", dropped))
}

// keyPairs is the keying step of a KV input.
func (b *builder) keyPairs() *keyPairsFn {
	return &keyPairsFn{ValueType: beam.EncodedType{T: b.sh.rowType}, KeyKind: int(b.sh.keyType.Kind()), Checks: b.sh.checks, UID: b.uid, Metrics: b.metrics}
}

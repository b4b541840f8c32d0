package dedup

import "github.com/apache/beam/sdks/v2/go/pkg/beam"

// KeepLast keeps the last row per key of rows, a PCollection of a Go struct
// type, and returns a changelog of the same type: a key's first row as +I,
// each replacement as -U (the previous row) then +U (the new one), a
// deletion as -D, with the kind written into the OutputKind (or Changelog)
// column. Without OnTime or SequenceBy the last row is the last to arrive;
// with them, the one with the largest value (ties: the later arrival). A
// row equal to the stored one in every column but the kind emits nothing.
// On bounded input the result is each key's final row, as +I. It panics on
// a construction error (see TryKeepLast); rows it cannot process are
// counted as dead_lettered and dropped (see KeepLastWithErrors).
func KeepLast(s beam.Scope, rows beam.PCollection, opts ...Option) beam.PCollection {
	out, _, err := tryKeep(s, rows, opts, keepLast)
	if err != nil {
		panic(err)
	}
	return out
}

// TryKeepLast is KeepLast returning construction errors instead of
// panicking.
func TryKeepLast(s beam.Scope, rows beam.PCollection, opts ...Option) (beam.PCollection, error) {
	out, _, err := tryKeep(s, rows, opts, keepLast)
	return out, err
}

// KeepLastWithErrors is KeepLast that also returns the rows it could not
// process, as a PCollection of DeadLetter with the reason. It panics on a
// construction error.
func KeepLastWithErrors(s beam.Scope, rows beam.PCollection, opts ...Option) (beam.PCollection, beam.PCollection) {
	out, dead, err := tryKeep(s, rows, opts, keepLast)
	if err != nil {
		panic(err)
	}
	return out, dead
}

// TryKeepLastWithErrors is KeepLastWithErrors returning construction
// errors instead of panicking.
func TryKeepLastWithErrors(s beam.Scope, rows beam.PCollection, opts ...Option) (beam.PCollection, beam.PCollection, error) {
	return tryKeep(s, rows, opts, keepLast)
}

// KeepLastPerKey is KeepLast for a PCollection of KV<K,V>, returning
// KV<K,V>. K is as for KeepFirstPerKey; V is a struct with the kind column
// (OutputKind or Changelog), or any type with Upsert. It panics on a
// construction error.
func KeepLastPerKey(s beam.Scope, kvs beam.PCollection, opts ...Option) beam.PCollection {
	out, err := TryKeepLastPerKey(s, kvs, opts...)
	if err != nil {
		panic(err)
	}
	return out
}

// TryKeepLastPerKey is KeepLastPerKey returning construction errors.
func TryKeepLastPerKey(s beam.Scope, kvs beam.PCollection, opts ...Option) (beam.PCollection, error) {
	return tryKeepPerKey(s, kvs, opts, keepLast)
}

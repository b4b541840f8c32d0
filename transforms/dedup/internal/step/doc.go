// Package step is what package dedup's pipelines run on the workers: the
// keying steps, the stateful step of KeepFirst and KeepLast with its state
// I/O, and the merge of bounded input and window dedup. Package dedup
// builds the pipeline from the options and declares the DoFn types, whose
// names (a DoFn's step is named after its type) are part of a running
// job's update surface; each embeds a runtime of this package. The rules
// are package core's, which imports no Beam.
//
// A file each, by role:
//
//	keyfn.go        KeyRows, KeyPairs: every row counted, checked, keyed
//	fold.go         FoldRows: KeepLast's mini-batch fold before the shuffle
//	columns.go      Columns: the one reader of a row's kind, OnTime, SequenceBy
//	step.go         Step: a stateful DoFn's decisions, output and timers
//	dofns.go        Untimed, Timed: the runtimes the stateful DoFns embed
//	stateio.go      stateIO, waiting: how the step makes its state requests
//	overlap.go      overlapped: a bundle's requests in flight together, the batch
//	requests.go     requests: those in flight, chained per key, with deadlines
//	reliance.go     what overlapping relies on in the SDK, and the checks made before relying on it
//	state.go        Store (Marks, Versions): a key's state in its cell, and what it costs; the bundle cache
//	timertag.go     an event-time candidate carried in its timer's tag
//	merge.go        the merge's DoFns and combine (bounded input, window dedup)
//	bundlemerge.go  BundleMerge: the combine's work within a bundle
//	bucket.go       Bucket, MergeBucket: a bundle's candidates batched per key-hash bucket across the shuffle
//	candidate.go    the merge accumulator's coder
//	metrics.go      the counters' names and the one place an outcome is counted
//	limits.go       how many keys a step holds per bundle
//	register.go     Register: each runtime's method callers, without register.DoFnNxM
package step

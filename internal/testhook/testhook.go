// Package testhook carries the settings that only tests and benchmarks
// set on a transform (the helpers tests call are in package
// testing/deduptest): a transform package installs its option makers here
// at init, and keeps the processing-time clocks tests register. Nothing
// here is part of the public API.
package testhook

import (
	"fmt"
	"sync"
	"time"
)

// Dedup is what tests may set on a dedup transform.
type Dedup struct {
	// Clock names a clock registered with RegisterClock that replaces the
	// wall clock as processing time.
	Clock string
	// PerKeyMerge makes the bounded merge group each key's candidates, not
	// batches of them per key-hash bucket, for tests that compare the two.
	PerKeyMerge bool
	// BucketBytes, when not 0, caps the bucketed merge's batches at that
	// many bytes, so that a test's small input reaches the cap.
	BucketBytes int
	// WaitEach makes the stateful step wait for each state request in
	// turn rather than keep several in flight (docs/state.md), for tests
	// and benchmarks that compare the two: decisions and requests are the
	// same either way.
	WaitEach bool
}

// Pgsink is what tests may set on pgsink.Write.
type Pgsink struct {
	// SkipCheck turns off the table check at construction: the workers
	// then check the table before their first bundle.
	SkipCheck bool
}

// PgsinkOption makes a pgsink.Option (as any) that applies set; package
// pgsink installs it at init.
var PgsinkOption func(set func(*Pgsink)) any

// DedupOption makes a dedup.Option (as any) that applies set; package
// dedup installs it at init.
var DedupOption func(set func(*Dedup)) any

// Clocks are looked up by name because DoFns are serialized: a function
// cannot travel in a DoFn, a name can. A registered clock exists only in
// the process that registered it, so it works with in-process (loopback)
// workers, which is what tests use.
var clocks sync.Map // name -> func(eventTime time.Time) time.Time

// RegisterClock registers a processing-time clock under name. The clock is
// given the event time of the row being processed.
func RegisterClock(name string, now func(eventTime time.Time) time.Time) {
	clocks.Store(name, now)
}

// HasClock reports whether a clock is registered under name.
func HasClock(name string) bool {
	_, ok := clocks.Load(name)
	return ok
}

// ResolveClock returns the clock registered under name, or the wall clock
// for "".
func ResolveClock(name string) (func(time.Time) time.Time, error) {
	if name == "" {
		return func(time.Time) time.Time { return time.Now() }, nil
	}
	v, ok := clocks.Load(name)
	if !ok {
		return nil, fmt.Errorf("dedup: clock %q is not registered in this worker", name)
	}
	return v.(func(time.Time) time.Time), nil
}

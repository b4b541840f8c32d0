package dedup

import (
	"fmt"
	"sync"
	"time"
)

// Clocks are looked up by name because DoFns are serialized: a function
// cannot travel in a DoFn, a name can. Registered clocks exist only in the
// process that registered them, so they work with in-process (loopback)
// workers, which is what tests use.
var clocks sync.Map // name -> func(eventTime time.Time) time.Time

// RegisterClock registers a processing-time clock for UseClock. The clock
// is given the event time of the row being processed; a test clock may
// return it, so that a row's timestamp doubles as its arrival time and
// expiry becomes deterministic on any runner. For tests only.
func RegisterClock(name string, now func(eventTime time.Time) time.Time) {
	clocks.Store(name, now)
}

func lookupClock(name string) (func(time.Time) time.Time, bool) {
	v, ok := clocks.Load(name)
	if !ok {
		return nil, false
	}
	return v.(func(time.Time) time.Time), true
}

func wallClock(time.Time) time.Time { return time.Now() }

// resolveClock returns the clock named by UseClock, or the wall clock.
func resolveClock(name string) (func(time.Time) time.Time, error) {
	if name == "" {
		return wallClock, nil
	}
	c, ok := lookupClock(name)
	if !ok {
		return nil, fmt.Errorf("dedup: clock %q is not registered in this worker", name)
	}
	return c, nil
}

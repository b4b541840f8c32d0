// Package micros is how the transforms keep an event time to the
// microsecond while Beam keeps timestamps, watermarks and timers in
// milliseconds: the millisecond and the microseconds past it, and Beam's
// timestamp range. No Beam imports (rowspec, which has none, uses it).
package micros

import "math"

// The event times a time column may hold: Beam's timestamp range
// (mtime.MinTimestamp to mtime.MaxTimestamp, the latter excluded), in Unix
// milliseconds; every one of them is an int64 of microseconds too.
const (
	MinMillis = math.MinInt64 / 1000
	MaxMillis = math.MaxInt64 / 1000 // excluded
)

// Of is the instant ms milliseconds and sub microseconds past the Unix
// epoch, in microseconds: how a transform keeps a time that its state or
// its timestamps hold in milliseconds.
func Of(ms int64, sub uint16) int64 { return ms*1000 + int64(sub) }

// Split is Of reversed: the millisecond of us (rounded down) and the
// microseconds past it, 0 to 999.
func Split(us int64) (ms int64, sub uint16) {
	ms = us / 1000
	if us%1000 < 0 {
		ms--
	}
	return ms, uint16(us - ms*1000)
}

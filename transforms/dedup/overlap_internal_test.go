package dedup

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// Every mode of the stateful step, the timed ones too (their reads waited
// for, their writes overlapped) and the batched ones, decides with its
// requests overlapped exactly as waiting for each: on a random stream of
// bundles (some past a batch), watermark and clock moves through each of
// the restore test's modes and the DoFns they leave out, the same output in
// the same order, the same state and timers left, each key's requests the
// same and in the same order, never two of a key at once, none between
// bundles. The backend's requests finish out of order.
func TestOverlap_EveryModeDecidesAsWaitingForEachRequest(t *testing.T) {
	fns := map[string]bool{}
	for i, tc := range everyMode() {
		t.Run(tc.name, func(t *testing.T) {
			events := randomStream(tc, rand.New(rand.NewPCG(uint64(i), 7)))
			run := func(overlap bool) *restoreDriver {
				d := newRestoreDriver(t, tc, nil, overlap)
				d.req.Jitter = true
				d.run(events)
				require.Equal(t, overlap, d.step.Overlapping())
				fns[fmt.Sprintf("%T", d.fn.Interface())] = true
				return d
			}
			want, got := run(false), run(true)
			require.NotEmpty(t, want.out)
			assert.Equal(t, want.out, got.out, "the same output, in the same order")
			assert.Equal(t, want.snapshot(), got.snapshot(), "the same state and timers left")
			assert.Equal(t, want.req.Log, got.req.Log, "each key's requests, in order")
			assert.Empty(t, got.req.Overlaps, "two requests of a key at once")
			assert.Zero(t, got.req.Late, "requests between bundles")
		})
	}
	assert.Len(t, fns, 6, "every stateful DoFn: %v", fns)
}

// everyMode is the restore test's modes and the DoFns they leave out.
func everyMode() []restoreCase {
	const m = time.Minute
	return append(restoreCases(),
		restoreCase{name: "KeepFirst, watermarkless, EventTimeTTL (event-time cleanup)", opts: []Option{rowspec.PartitionBy("id"), EventTimeTTL(m), OutputDropped()}},
		restoreCase{name: "KeepLast, no TTL, upsert", last: true, opts: []Option{rowspec.PartitionBy("id"), rowspec.Upsert(), OutputDropped()}},
		restoreCase{name: "KeepLast, no TTL, changelog", last: true, opts: []Option{rowspec.PartitionBy("id"), rowspec.KindColumn("op"), OutputDropped()},
			events: []restoreEvent{rows(rr("+I", "a", "", 0))}},
	)
}

// randomStream is 80 random events in tc's mode: bundles of 1 to 300 rows
// of 25 keys (with kinds where the case's own rows have them), at times around
// a moving base, and moves of the watermark and of the processing clock.
func randomStream(tc restoreCase, rng *rand.Rand) []restoreEvent {
	kinds := []string{""}
	for _, e := range tc.events {
		for _, r := range e.rows {
			if r.Op != "" {
				kinds = []string{"+I", "+U", "-U", "-D"}
			}
		}
	}
	var events []restoreEvent
	base, wm, n := time.Duration(0), -time.Hour, 0
	for range 80 {
		switch rng.IntN(5) {
		case 0:
			wm = max(wm, base-time.Duration(rng.IntN(120))*time.Second)
			events = append(events, wmAt(wm))
		case 1:
			events = append(events, procBy(time.Duration(1+rng.IntN(40))*time.Second))
		default:
			var rs []restoreRow
			for range 1 + rng.IntN(300) {
				at := base + time.Duration(rng.IntN(240_000_000)-120_000_000)*time.Microsecond
				rs = append(rs, rr(kinds[rng.IntN(len(kinds))], fmt.Sprint("k", rng.IntN(25)), fmt.Sprint(n), at))
				n++
			}
			events = append(events, rows(rs...))
			base += 10 * time.Second
		}
	}
	return append(events, wmAt(base+time.Hour))
}

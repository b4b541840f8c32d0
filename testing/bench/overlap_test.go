package bench_test

import (
	"github.com/beamdedup/beamdedup/testing/bench"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/testing/deduptest"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// TestOverlapState_RequestsOverlapAndNoneOutlivesItsBundle follows every
// state request the stateful step sends (bench.StateFlights) on the budget's
// input: with the overlap on (the default) several of a bundle's requests
// are in flight at once, in the batched modes (no timer) and in the
// event-time mode, whose writes only overlap, and per bucket, whose writes
// go out together at the bundle's end; every one is answered, and
// none after its bundle ended. OverlapState(false) waits for each in turn.
// The requests themselves are the budget's either way (statefulRun checks
// the counters against the requests sent).
func TestOverlapState_RequestsOverlapAndNoneOutlivesItsBundle(t *testing.T) {
	for _, tc := range []struct {
		name   string
		keep   func(beam.Scope, beam.PCollection, ...dedup.Option) dedup.Result
		opts   []dedup.Option
		cell   string
		insert bool
	}{
		{"keepfirst", dedup.KeepFirst, nil, "keepfirst", false},
		{"keepfirst_eventtime", dedup.KeepFirst, []dedup.Option{rowspec.OnTime("ts")}, "keepfirst", false},
		{"keeplast_changelog", dedup.KeepLast, []dedup.Option{rowspec.KindColumn("op")}, "keeplast", true},
		{"keepfirst_per_bucket", dedup.KeepFirst, []dedup.Option{dedup.StateBuckets(16)}, "keepfirst-buckets", false},
	} {
		for _, on := range []bool{true, false} {
			name := tc.name
			if !on {
				name += "/waiting"
			}
			t.Run(name, func(t *testing.T) {
				w := budgetInput
				w.InsertOnly = tc.insert
				opts := append([]dedup.Option{dedup.MiniBatch(false), deduptest.OverlapState(on)}, tc.opts...)
				_, out := statefulRun(t, tc.keep, w, opts, tc.cell)
				require.Equal(t, int64(w.Keys), min(out, int64(w.Keys)), "every key out")
				f := bench.StateFlights()
				t.Logf("%+v", f)
				require.Positive(t, f.Answered)
				assert.Zero(t, f.Unanswered, "every request answered")
				assert.Zero(t, f.AfterEnd, "no request sent or answered after its bundle ended")
				if on {
					assert.Greater(t, f.MaxInFlight, 1, "requests in flight together")
				} else {
					assert.Equal(t, 1, f.MaxInFlight, "each request waited for in turn")
				}
			})
		}
	}
}

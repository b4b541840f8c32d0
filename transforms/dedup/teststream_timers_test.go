package dedup_test

import (
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/teststream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// What a TestStream does with a processing-time timer on Prism: the
// stream's end (its infinite watermark) ends the job without waiting for
// the timer, which fires only if the stream advances processing time past
// it (Prism's synthetic clock under TestStream, notes/beam-defects.md 3).
// Here watermarkless KeepFirst sets an hour's cleanup timer per key: the
// job ends within the run's deadline either way, and the keys expire from
// the timer only with the advance. (Bounded input sets no such timer: Prism
// would wait it out, notes/beam-defects.md 5.)
func TestCleanupTimers_ATestStreamEndsWithoutWaitingForAProcessingTimeTimer(t *testing.T) {
	for _, tc := range []struct {
		name    string
		advance bool // AdvanceProcessingTime past the TTL before the end
		expired int64
	}{
		{"no processing-time advance: the timers never fire", false, 0},
		{"processing time advanced past the TTL: they fire", true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, s := beam.NewPipelineWithRoot()
			ts := teststream.NewConfig()
			require.NoError(t, ts.AddElements(1000, userEvent{"Vas", "login", 1}, userEvent{"Bob", "view", 2}))
			require.NoError(t, ts.AdvanceWatermark(1000))
			if tc.advance {
				ts.AdvanceProcessingTime(int64(61 * time.Minute / time.Millisecond))
			}
			require.NoError(t, ts.AdvanceWatermarkToInfinity())
			dedup.KeepFirst(s, teststream.Create(s, ts), rowspec.PartitionBy("user_name"), dedup.StateTTL(time.Hour))
			c := run(t, p) // a 2-minute deadline: far less than the hour's timers
			assert.Equal(t, int64(2), c.Emitted)
			assert.Equal(t, int64(2), c.TimerSets, "a cleanup timer per key")
			assert.Equal(t, tc.expired, c.KeysExpired, "keys deleted by their timer")
		})
	}
}

package dedup_test

import (
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/teststream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// Spec 4.1.3.6 through the real transform and Prism's processing-time
// timers: arrivals at 0/3/7/10/16 minutes (TestStream's synthetic clock),
// TTL 5 minutes. With refresh each duplicate pushes the expiry on, so only
// the rows at 0 and 16 are emitted; without, the key expires 5 minutes
// after each emitted row, so 0, 7 and 16 are.
func TestStateTTL_Spec_4_1_3_6_RefreshContrastOnPrismTimers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		reset   bool
		want    []any
		emitted int64
	}{
		{"refresh on duplicate", true, []any{"Vas/login#0", "Vas/login#16"}, 2},
		{"no refresh", false, []any{"Vas/login#0", "Vas/login#7", "Vas/login#16"}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, s := beam.NewPipelineWithRoot()
			ts := teststream.NewConfig()
			last := 0
			for i, minute := range []int{0, 3, 7, 10, 16} {
				ts.AdvanceProcessingTime(int64(time.Duration(minute-last) * time.Minute / time.Millisecond))
				last = minute
				require.NoError(t, ts.AddElements(int64(i+1)*1000, userEvent{"Vas", "login", int64(minute)}))
				require.NoError(t, ts.AdvanceWatermark(int64(i+1)*1000))
			}
			require.NoError(t, ts.AdvanceWatermarkToInfinity())
			in := teststream.Create(s, ts)
			out := dedup.KeepFirst(s, in, rowspec.PartitionBy("user_name"), dedup.StateTTL(5*time.Minute), dedup.ResetTTLOnDuplicate(tc.reset)).Rows
			passert.Equals(s, beam.ParDo(s, formatUser, out), tc.want...)
			c := run(t, p)
			assert.Equal(t, tc.emitted, c.Emitted)
			assert.Equal(t, 5-tc.emitted, c.DuplicatesDropped)
		})
	}
}

// Without cleanup timers the semantics hold (expiry is checked on arrival)
// and no processing-time timer is set (for a runner that has none; on
// Prism the stream's end would not wait for the 1-hour timer either:
// TestCleanupTimers_ATestStreamEndsWithoutWaitingForAProcessingTimeTimer).
func TestCleanupTimers_OffSetsNoTimerOnUnboundedInput(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	in := streamOf(t, s, userEvent{"Vas", "login", 1}, userEvent{"Vas", "login", 2}, userEvent{"Bob", "x", 3})
	out := dedup.KeepFirst(s, in, rowspec.PartitionBy("user_name"), dedup.StateTTL(time.Hour), dedup.CleanupTimers(false)).Rows
	passert.Equals(s, beam.ParDo(s, formatUser, out), "Vas/login#1", "Bob/x#3")
	c := run(t, p)
	assert.Zero(t, c.TimerSets)
	assert.Equal(t, int64(1), c.DuplicatesDropped)
}

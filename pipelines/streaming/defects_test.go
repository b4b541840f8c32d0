package streaming

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamdedup/beamdedup/internal/jobrun"
	"github.com/beamdedup/beamdedup/pipelines/orders"
	"github.com/beamdedup/beamdedup/testing/pipelinetest"
	"github.com/beamdedup/beamdedup/testing/pubsubtest"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/pubsubio"
)

// TestBeamDefect_TerminalStatefulStageStallsTheStream reproduces the Prism
// stall of notes/beam-defects.md ("A streaming job stalls"): the pipeline
// as it was before the workaround, KeepFirst fused with the publish (a
// stage with no output and no timers), at 10,000 orders (every order
// priced under 100 published twice). Prism's progress loop of every
// running bundle of that stage busy-waits, up to 8 bundles at once, and
// the state round trips of those bundles starve: the job stops making
// progress. The watchdog fails the run after 60 s without a committed
// counter moving; the test passes when that happens, i.e. when the defect
// is still there. Opt in: BEAMDEDUP_REPRO=1 (takes 1-3 min).
func TestBeamDefect_TerminalStatefulStageStallsTheStream(t *testing.T) {
	if os.Getenv("BEAMDEDUP_REPRO") == "" {
		t.Skip("reproduction of an upstream defect; set BEAMDEDUP_REPRO=1 to run (1-3 min)")
	}
	srv := pubsubtest.New(t, time.Second)
	srv.MustTopic(t, "orders")
	out := srv.MustTopic(t, "orders-deduped")
	sub := srv.MustSubscription(t, "orders", "orders-sub", 10*time.Second)
	total := 0
	for _, o := range orders.Generate(10000, 1) {
		data, err := json.Marshal(o)
		require.NoError(t, err)
		srv.PublishRaw("orders", data, nil)
		total++
	}

	p, s := beam.NewPipelineWithRoot()
	_, err := Build(s, Config{
		Subscription: sub, OutputTopic: out, Endpoint: srv.Addr, fusedSink: true,
		Dedup: []dedup.Option{dedup.StateTTL(0)},
		Read:  []pubsubio.Option{pubsubio.IdleStop(5 * time.Second), pubsubio.MaxBundleDuration(500 * time.Millisecond)},
	})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	job := pipelinetest.Job(t)
	job.StallLimit = 60 * time.Second
	_, err = jobrun.Run(ctx, p, Watched(job, func(c map[string]int64) bool {
		acked := srv.AckedMessages()
		c["pubsub/acked"] = int64(acked)
		return acked < total
	}))
	var stall *jobrun.Stall
	if assert.ErrorAs(t, err, &stall, "with KeepFirst fused with the sink the job stalls (it finished: %v)", err) {
		t.Log(err)
	}
}

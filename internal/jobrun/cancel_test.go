// Not built with -race: a job cancelled as its bundles start meets a data
// race inside Beam's Go harness, which the race detector reports
// (notes/beam-defects.md 29).

//go:build !race

package jobrun_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	jobpb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/jobmanagement_v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/internal/jobrun"
)

// A job cancelled as soon as Start returns, before it is on the job server
// or before Prism has started its worker: the cancellation waits for the
// job to be listed, the job ends cancelled, and this process, which hosts
// Prism, goes on. With Beam's own LOOPBACK pool, stopped when beam.Run
// returned, Prism's late start of the worker panicked and ended the
// process within the first few jobs.
func TestRun_AJobCancelledAsItIsSubmittedEndsCancelledAndTheProcessHostingPrismGoesOn(t *testing.T) {
	release := make(chan struct{})
	releases.Store(t.Name(), release)
	t.Cleanup(func() { close(release) })
	for i := range 20 {
		p, s := beam.NewPipelineWithRoot()
		beam.ParDo(s, &holdFn{Test: t.Name()}, beam.Create(s, 3))
		o := local(t, jobrun.Options{StallLimit: -1, Name: fmt.Sprintf("jobrun-test-cancel-at-once-%d", i)})
		j, err := jobrun.Start(context.Background(), p, o)
		require.NoError(t, err)
		require.NoError(t, j.Cancel())
		_, err = j.Wait()
		require.NoError(t, err, "job %d: cancelled on request, ended in the runner", i)
		assert.Equal(t, jobpb.JobState_CANCELLED, state(t, o.Endpoint, o.Name), "job %d", i)
	}
}

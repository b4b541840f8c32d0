package jobrun_test

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	jobpb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/jobmanagement_v1"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/internal/jobrun"
	"github.com/beamdedup/beamdedup/internal/jobrun/localprism"
	"github.com/beamdedup/beamdedup/testing/prismtest"
)

func TestMain(m *testing.M) { prismtest.Main(m) }

var counted = beam.NewCounter("jobrun_test", "counted")

// releases holds, by test, the channel that unblocks holdFn.
var releases sync.Map

func count(ctx context.Context, x int) int {
	counted.Inc(ctx, 1)
	return x
}

// holdFn blocks on element 3 until its test ends: a step that holds
// work and finishes none of it.
type holdFn struct{ Test string }

func (f *holdFn) ProcessElement(x int) int {
	if ch, ok := releases.Load(f.Test); ok && x == 3 {
		<-ch.(chan struct{})
	}
	return x
}

func init() {
	register.Function2x1(count)
	register.DoFn1x1[int, int](&holdFn{})
}

// pipeline counts five elements. With a hold, it holds one of them in a
// later stage (after a Reshuffle, so the first stage commits) until the
// test ends.
func pipeline(t *testing.T, hold bool) *beam.Pipeline {
	p, s := beam.NewPipelineWithRoot()
	xs := beam.ParDo(s, count, beam.Create(s, 1, 2, 3, 4, 5))
	if hold {
		ch := make(chan struct{})
		releases.Store(t.Name(), ch)
		t.Cleanup(func() { close(ch) })
		beam.ParDo(s, &holdFn{Test: t.Name()}, beam.Reshuffle(s, xs))
	}
	return p
}

func local(t *testing.T, o jobrun.Options) jobrun.Options {
	t.Helper()
	o, err := localprism.Options(o)
	require.NoError(t, err)
	return o
}

func flags() [4]string {
	return [4]string{*jobopts.Endpoint, *jobopts.EnvironmentType, *jobopts.EnvironmentConfig, *jobopts.JobName}
}

func TestRun_ReturnsTheJobsResultAndLeavesBeamsFlagsAsItFoundThem(t *testing.T) {
	before := flags()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pr, err := jobrun.Run(ctx, pipeline(t, false), local(t, jobrun.Options{}))
	require.NoError(t, err)
	var n int64
	for _, c := range pr.Metrics().AllMetrics().Counters() {
		if c.Name() == "counted" {
			n += c.Result()
		}
	}
	assert.Equal(t, int64(5), n)
	assert.Equal(t, before, flags(), "--endpoint, --environment_type, --environment_config, --job_name")
}

// A LOOPBACK job on Prism stages an empty placeholder as its worker binary
// and removes it when it ends: Beam's LOOPBACK leaves one in the temporary
// directory per job.
func TestRun_ALoopbackJobOnPrismLeavesNoFileInTheTemporaryDirectory(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := jobrun.Run(ctx, pipeline(t, false), local(t, jobrun.Options{}))
	require.NoError(t, err)
	left, err := os.ReadDir(tmp)
	require.NoError(t, err)
	assert.Empty(t, left)
}

func TestRun_CancelsAJobWhoseBundlesStopFinishingWithOneLineSayingWhat(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o := local(t, jobrun.Options{What: "test job", StallLimit: 2 * time.Second, Name: "jobrun-test-stall"})
	j, err := jobrun.Start(ctx, pipeline(t, true), o)
	require.NoError(t, err)
	_, err = j.Wait()

	var stall *jobrun.Stall
	require.ErrorAs(t, err, &stall, "got %v", err)
	assert.Equal(t, "no bundle finished and no SDK worker reported progress", stall.Note)
	assert.Positive(t, stall.Counters["committed elements"], "the first stage committed")
	assert.Contains(t, err.Error(), "test job on prism stalled: no bundle finished")
	assert.Contains(t, err.Error(), "no step of the pipeline blocks", "LOOPBACK's hint")
	assert.NotContains(t, err.Error(), "\n")
	assert.NoError(t, ctx.Err(), "reported before the test's deadline")
	assert.Equal(t, jobpb.JobState_CANCELLED, state(t, o.Endpoint, o.Name), "cancelled in the runner, not only abandoned")
}

func TestRun_CancelsTheJobInTheRunnerWhenTheContextEndsFirst(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	o := local(t, jobrun.Options{StallLimit: -1, Name: "jobrun-test-give-up"})
	j, err := jobrun.Start(ctx, pipeline(t, true), o)
	require.NoError(t, err)
	gaveUp := errors.New("gave up")
	go func() {
		waitFor(t, o.Endpoint, o.Name, jobpb.JobState_RUNNING)
		cancel(gaveUp)
	}()
	done := make(chan error, 1)
	go func() { _, err := j.Wait(); done <- err }()
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		require.FailNow(t, "Wait did not return within a minute of the cancellation")
	}
	assert.ErrorIs(t, err, gaveUp)
	assert.Equal(t, jobpb.JobState_CANCELLED, state(t, o.Endpoint, o.Name))
}

func TestStart_RefusesPrismWithoutAJobServer(t *testing.T) {
	defer func(old string) { *jobopts.Endpoint = old }(*jobopts.Endpoint)
	*jobopts.Endpoint = "" // TestMain points it at the in-process job server
	_, err := jobrun.Start(context.Background(), pipeline(t, false), jobrun.Options{Runner: "prism"})
	assert.ErrorContains(t, err, "runner prism needs a job server")
	_, err = jobrun.Start(context.Background(), pipeline(t, false), jobrun.Options{})
	assert.ErrorContains(t, err, "Runner is required")
}

// The job is submitted with Prism's bundle splitting off and the given
// experiments; the flag is as it was before, once the job is on the job
// server. With AllowSplits (a reproduction of the defect) it is not added.
func TestStart_SubmitsPrismJobsWithoutBundleSplitsKeepingTheGivenExperiments(t *testing.T) {
	defer func(old string) { *jobopts.Experiments = old }(*jobopts.Experiments)
	for _, tc := range []struct {
		name  string
		allow bool
		want  []string
	}{
		{"by default", false, []string{"my_experiment", jobrun.NoSplitsExperiment}},
		{"AllowSplits", true, []string{"my_experiment"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			*jobopts.Experiments = "my_experiment"
			if tc.allow {
				defer jobrun.AllowSplits()()
			}
			var submitted []string
			o := local(t, jobrun.Options{BeforeSubmit: func(*beam.Pipeline) error {
				submitted = jobopts.GetExperiments()
				return nil
			}})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, err := jobrun.Run(ctx, pipeline(t, false), o)
			require.NoError(t, err)
			assert.Equal(t, tc.want, submitted)
			assert.Equal(t, "my_experiment", *jobopts.Experiments)
		})
	}
}

// A job that outlives Options.Timeout is cancelled in the runner, and Wait
// says so with a *TimedOut.
func TestRun_CancelsAJobThatOutlivesItsTimeout(t *testing.T) {
	o := local(t, jobrun.Options{What: "test job", StallLimit: -1, Timeout: 3 * time.Second, Name: "jobrun-test-timeout"})
	start := time.Now()
	_, err := jobrun.Run(context.Background(), pipeline(t, true), o)
	var to *jobrun.TimedOut
	require.ErrorAs(t, err, &to, "got %v", err)
	assert.Equal(t, "test job did not end within 3s, its timeout; cancelled in the runner", err.Error())
	assert.Less(t, time.Since(start), time.Minute)
	assert.Equal(t, jobpb.JobState_CANCELLED, state(t, o.Endpoint, o.Name))
}

// state returns the state of the last job called name on the job server.
func state(t *testing.T, endpoint, name string) jobpb.JobState_Enum {
	t.Helper()
	var got jobpb.JobState_Enum
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	jobs, err := jobrun.Jobs(ctx, endpoint)
	require.NoError(t, err)
	for _, info := range jobs {
		if info.GetJobName() == name {
			got = info.GetState()
		}
	}
	return got
}

// waitFor waits until the job called name is in state want.
func waitFor(t *testing.T, endpoint, name string, want jobpb.JobState_Enum) {
	for i := 0; i < 600 && state(t, endpoint, name) != want; i++ {
		time.Sleep(50 * time.Millisecond)
	}
}

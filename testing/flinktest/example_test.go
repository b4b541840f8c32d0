package flinktest_test

import (
	"context"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/internal/flinkserver"
	"github.com/beamdedup/beamdedup/pipelines/orders"
	"github.com/beamdedup/beamdedup/testing/flinktest"
)

// buildExample builds cmd/dedupexample into dir and returns its path and
// an input of 300 orders (one duplicate each).
func buildExample(t *testing.T, dir string) (bin, in string) {
	t.Helper()
	bin = filepath.Join(dir, "dedupexample")
	build := exec.Command("go", "build", "-o", bin, "./cmd/dedupexample")
	build.Dir = filepath.Join("..", "..")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	in = filepath.Join(dir, "in.jsonl")
	require.NoError(t, orders.WriteSample(in, 300, 1))
	return bin, in
}

// runExample runs the example with args and returns its sorted output rows.
func runExample(t *testing.T, bin, in, outFile string, args ...string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"--input=" + in, "--output=" + outFile}, args...)...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	matches, err := filepath.Glob(outFile + "*")
	require.NoError(t, err)
	var rows []string
	for _, m := range matches {
		b, err := os.ReadFile(m)
		require.NoError(t, err)
		rows = append(rows, strings.Fields(string(b))...)
	}
	slices.Sort(rows)
	return rows
}

// A user's own main (cmd/dedupexample: KeepFirst, beamx.Run) runs
// unchanged on Prism and on the cluster, with Beam's flags and the Flink
// options as flags, and writes the same rows on both.
func TestExampleMain_RunsUnchangedOnPrismAndOnTheCluster(t *testing.T) {
	c := flinktest.SharedCluster(t)
	dir := t.TempDir()
	bin, in := buildExample(t, dir)
	results := map[string][]string{}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"prism", []string{"--experiments=prism_disable_sdf_split"}},
		{"flink", []string{"--runner=flink", "--endpoint=" + c.Endpoint, "--environment_type=LOOPBACK", "--max_parallelism=32", "--parallelism=1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			results[tc.name] = runExample(t, bin, in, filepath.Join(dir, tc.name+".jsonl"), tc.args...)
		})
	}
	require.Len(t, results["prism"], 300, "one row per order")
	assert.Equal(t, results["prism"], results["flink"])
}

// A user's own main run on the cluster in streaming mode with no
// checkpoint flag, as a user submits it (its Flink options plain Go flags
// in the runner's format), gets the job server's defaults
// for a Go job, read back from Flink's REST API: a checkpoint every 5 s
// (/jobs/:id/checkpoints/config) and its bundles finished before each
// checkpoint (the runner's options, in the job's user-config), its latest
// checkpoint kept when it is cancelled or fails; its own
// flags win, false and none included. The job ends when its input has
// been read (the job server ends its impulse once its splittable sources
// have), with every order out once.
func TestExampleMain_InStreamingModeGetsTheJobServersCheckpointDefaultsUnlessItSetsItsOwn(t *testing.T) {
	c := flinktest.SharedCluster(t)
	dir := t.TempDir()
	bin, in := buildExample(t, dir)
	for _, tc := range []struct {
		name     string
		args     []string
		interval int64 // Flink's interval of a job without checkpoints: math.MaxInt64
		finish   string
	}{
		{"defaults", nil, flinkserver.DefaultCheckpointInterval.Milliseconds(), "true"},
		{"its own interval", []string{"--checkpointing_interval=2000"}, 2000, "true"},
		// Without checkpoints: with them, a checkpoint before the impulse's
		// first bundle ends loses the input (notes/beam-defects.md, 27).
		{"its own finish_bundle_before_checkpointing", []string{"--checkpointing_interval=-1", "--finish_bundle_before_checkpointing=false"}, math.MaxInt64, "false"},
		{"none", []string{"--checkpointing_interval=-1"}, math.MaxInt64, "true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			began := time.Now()
			rows := runExample(t, bin, in, filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".jsonl"),
				append([]string{"--runner=flink", "--endpoint=" + c.Endpoint, "--environment_type=LOOPBACK", "--streaming"}, tc.args...)...)
			assert.Len(t, rows, 300, "one row per order")
			ctx := context.Background()
			jobs, err := rest(t).Jobs(ctx)
			require.NoError(t, err)
			require.NotEmpty(t, jobs)
			job := jobs[0] // the newest
			require.GreaterOrEqual(t, job.Start, began.UnixMilli(), "the example's job on the cluster: %+v", job)
			assert.Equal(t, "FINISHED", job.State)
			cfg, err := jobConfig(ctx, rest(t), job.ID)
			require.NoError(t, err)
			assert.Equal(t, tc.finish, cfg.User["finishBundleBeforeCheckpointing"], "finish_bundle_before_checkpointing")
			cc, err := checkpointConfig(ctx, rest(t), job.ID)
			require.NoError(t, err)
			assert.Equal(t, tc.interval, cc.Interval, "checkpoint interval")
			if tc.interval != math.MaxInt64 {
				assert.True(t, cc.Externalization.Enabled && !cc.Externalization.DeleteOnCancellation, "the latest checkpoint kept when the job is cancelled or fails: %+v", cc.Externalization)
			}
		})
	}
}

package flinktest_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/pipelines/orders"
	"github.com/beamdedup/beamdedup/testing/flinktest"
)

// A user's own main (cmd/dedupexample: KeepFirst, beamx.Run) runs
// unchanged on Prism and on the cluster, with Beam's flags and the Flink
// options as flags, and writes the same rows on both.
func TestExampleMain_RunsUnchangedOnPrismAndOnTheCluster(t *testing.T) {
	c := flinktest.SharedCluster(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "dedupexample")
	build := exec.Command("go", "build", "-o", bin, "./cmd/dedupexample")
	build.Dir = filepath.Join("..", "..")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	in := filepath.Join(dir, "in.jsonl")
	require.NoError(t, orders.WriteSample(in, 300, 1))
	results := map[string][]string{}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"prism", []string{"--experiments=prism_disable_sdf_split"}},
		{"flink", []string{"--runner=flink", "--endpoint=" + c.Endpoint, "--environment_type=LOOPBACK", "--max_parallelism=32", "--parallelism=1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			outFile := filepath.Join(dir, tc.name+".jsonl")
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, append([]string{"--input=" + in, "--output=" + outFile}, tc.args...)...)
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
			results[tc.name] = rows
		})
	}
	require.Len(t, results["prism"], 300, "one row per order")
	assert.Equal(t, results["prism"], results["flink"])
}

package flinktest_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/testing/flinktest"
	"github.com/beamdedup/beamdedup/testing/jobservertest"
	"github.com/beamdedup/beamdedup/testing/kafkatest"
)

// runjob's samples on the cluster, with the SDK workers in runjob
// (LOOPBACK) and in a worker pool (EXTERNAL), as docs/runners.md shows
// them, the watchdog following each job on Flink's REST API. Each run's
// summary must hold the lines given. The bounded orders job runs on
// 118,591 rows in batch mode: textio.Write's grouping holds the 100,000
// output rows in one record (some 11 MB), which a TaskManager's sort
// buffer must hold (5.25 MiB at 64 MiB of managed memory, where it failed:
// "The record exceeds the maximum size of a sort buffer"; the cluster has
// 256 MiB, docs/flink-jobserver.md).
func TestRunjob_RunsTheSamplesOnFlinkInEachEnvironment(t *testing.T) {
	c := flinktest.SharedCluster(t)
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	bin := filepath.Join(t.TempDir(), "runjob")
	build := exec.Command("go", "build", "-o", bin, "./cmd/runjob")
	build.Dir = root
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build ./cmd/runjob: %s", out)
	broker := kafkatest.Shared(t)
	for _, topic := range []string{"orders_with_duplicates", "orders_deduplicated", "orders_dead_letters"} {
		require.NoError(t, broker.CreateTopic(context.Background(), topic, 2))
	}
	pool := jobservertest.StartWorkerPool(t)
	jobservertest.RemoveBootCopies(t, bin)
	external := []string{"--environment_type=EXTERNAL", "--environment_config=" + pool.Addr, "--worker_binary=" + bin}
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"orders/external", append([]string{"--pipeline=orders", "--count=100000", "--output=" + filepath.Join(t.TempDir(), "orders.jsonl")}, external...),
			[]string{"(environment EXTERNAL)", "rows in             118591", "emitted             100000 (distinct order_ids in the input: 100000)"}},
		{"userevents/loopback", []string{"--pipeline=userevents", "--output=" + filepath.Join(t.TempDir(), "events.jsonl")}, []string{"rows in             8", "emitted             3"}},
		// orderstatus is not run here: its batch stages run at once in
		// slots of both TaskManagers, whose LOOPBACK workers collide
		// (notes/beam-defects.md, 20), and as TaskManager processes it
		// needs more network buffers than the tests' TaskManagers have.
		{"streaming/loopback", []string{"--pipeline=streaming", "--count=300"}, []string{"output topic: 300 messages for 300 distinct orders"}},
		// Seed 001 on Kafka (docs/kafka.md): processing-time timers off
		// (Flink runs no Go processing-time timers), event time on
		// created_at with an event-time retention.
		{"kafka/loopback", []string{"--pipeline=kafka", "--brokers=" + broker.Addr, "--produce", "--count=300", "--idle_stop=5s",
			"--state_ttl=0", "--event_time_ttl=2h", "--on_time=created_at"},
			[]string{"records read        351, 351 safe", "emitted             300\n", "dead-lettered       3\n",
				"every record        351 = 300 emitted + 48 duplicates dropped + 0 late + 3 dead-lettered"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, append([]string{"--runner=flink", "--endpoint=" + c.Endpoint, "--flink_rest=" + c.REST}, tc.args...)...)
			cmd.Dir = root
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "runjob %s:\n%s", strings.Join(tc.args, " "), out)
			for _, w := range tc.want {
				assert.Contains(t, string(out), w)
			}
			t.Logf("%s", out)
		})
	}
}

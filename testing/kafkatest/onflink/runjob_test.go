package onflink_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/internal/flinkrest"
	"github.com/beamdedup/beamdedup/internal/jobrun"
	"github.com/beamdedup/beamdedup/pipelines/orders"
	"github.com/beamdedup/beamdedup/pipelines/streaming"
	"github.com/beamdedup/beamdedup/testing/flinktest"
	"github.com/beamdedup/beamdedup/testing/kafkatest"
)

// runjob's Kafka pipeline on a local Flink cluster remembers across its
// restarts as a user runs it, with no flag for it: each run restores the
// newest state the run before left.
//
//  1. 1,000 orders; the run ends by --idle_stop, with a savepoint.
//  2. The next run restores that savepoint: of 300 resends of old orders
//     and 300 new ones, only the new ones come out. Once a checkpoint
//     triggered after they were out has completed, runjob is killed
//     (kill -9): its job stays on the cluster, its SDK workers gone.
//  3. The next run cancels that job, restores its latest checkpoint, and
//     again emits only the new orders of 300 resends and 300 new ones;
//     Ctrl-C stops it with a savepoint.
//
// Every order is once on the output topic, and the group committed to
// the end of each partition.
func TestOnFlink_RunjobKafkaRestoresItsLastSavepointOrRetainedCheckpointOnEachRestart(t *testing.T) {
	c := flinktest.SharedCluster(t)
	b := kafkatest.Shared(t)
	src := streaming.Kafka{Brokers: b.Addr, InputTopic: b.NewTopic(t, 2), OutputTopic: b.NewTopic(t, 2),
		DeadLetterTopic: b.NewTopic(t, 1), Group: "runjob-resume"}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	out := b.Count(t, src.OutputTopic)
	rest := flinkrest.New(c.REST)
	bin := buildRunjob(t)
	args := []string{"--runner=flink", "--endpoint=" + c.Endpoint, "--flink_rest=" + c.REST, "--pipeline=kafka",
		"--brokers=" + b.Addr, "--input_topic=" + src.InputTopic, "--output_topic=" + src.OutputTopic,
		"--dead_letter_topic=" + src.DeadLetterTopic, "--group=" + src.Group, "--state_ttl=0", "--event_time_ttl=2h",
		"--checkpointing_interval=1s", "--progress=2s"}

	all := orders.Generate(1600, 1) // with a duplicate of every order priced under 100
	// Created in the last half hour, as a live stream's are: the records'
	// timestamps are the event times the 2-hour retention counts from.
	shift := time.Now().Add(-30 * time.Minute).Sub(all[len(all)-1].CreatedAt)
	for i := range all {
		all[i].CreatedAt = all[i].CreatedAt.Add(shift)
	}
	ids := orderIDs(all)
	require.Len(t, ids, 1600)
	first, second, third := rowsOf(all, ids[:1000], false), rowsOf(all, ids[1000:1300], false), rowsOf(all, ids[1300:], false)
	seen := func(ids []string) int { return present(out.PerKey(), ids) }

	// 1. A first run, ended by --idle_stop.
	require.NoError(t, streaming.ProduceOrders(ctx, b.Addr, src.InputTopic, first))
	r := startRunjob(t, ctx, bin, append(args, "--idle_stop=3s"))
	r.wait(t, "--idle_stop")
	assert.Equal(t, 1000, seen(ids[:1000]), "the 1,000 orders of the first run out")
	assert.Contains(t, r.output(), "no savepoint or retained checkpoint of group runjob-resume")
	assert.Contains(t, r.output(), "(idle, every partition read to its end, with the savepoint file:")

	// 2. Restored from the savepoint; killed once a checkpoint holds what
	// it emitted.
	require.NoError(t, streaming.ProduceOrders(ctx, b.Addr, src.InputTopic, append(second, rowsOf(all, ids[:300], true)...)))
	r = startRunjob(t, ctx, bin, args)
	flinktest.Await(t, 3*time.Minute, "the 300 new orders of the second run out", func() bool { return seen(ids[1000:1300]) == 300 })
	assert.Contains(t, r.output(), "runjob: restoring file:", "the second run restores")
	assert.Contains(t, r.output(), "/runjob-kafka-runjob-resume/savepoint-", "the second run restores the first one's savepoint")
	resume, err := jobrun.FindResume(ctx, rest, "runjob-kafka-runjob-resume")
	require.NoError(t, err)
	t.Cleanup(func() { // no job of a failed run left on the shared cluster
		_, err := resume.CancelEarlier(context.Background(), rest)
		assert.NoError(t, err)
	})
	jobs, err := rest.Jobs(ctx)
	require.NoError(t, err)
	i := slices.IndexFunc(jobs, func(j flinkrest.JobOverview) bool { return !j.Terminal() })
	require.GreaterOrEqual(t, i, 0, "the second run's job on the cluster")
	job := jobs[i]
	allOut := time.Now().UnixMilli()
	flinktest.Await(t, 2*time.Minute, "a checkpoint triggered after the new orders were out, completed", func() bool {
		cs, err := rest.Checkpoints(ctx, job.ID)
		return err == nil && cs.Latest.Completed != nil && cs.Latest.Completed.Triggered > allOut
	})
	r.kill(t)

	// 3. The job of the killed run cancelled, its latest checkpoint
	// restored.
	require.NoError(t, streaming.ProduceOrders(ctx, b.Addr, src.InputTopic, append(third, rowsOf(all, ids[300:600], true)...)))
	r = startRunjob(t, ctx, bin, args)
	flinktest.Await(t, 3*time.Minute, "the 300 new orders of the third run out", func() bool { return seen(ids[1300:]) == 300 })
	r.stop(t)
	assert.Contains(t, r.output(), "runjob: cancelled the earlier job "+job.ID)
	assert.Contains(t, r.output(), "runjob: restoring file:")
	assert.Contains(t, r.output(), "/runjob-kafka-runjob-resume/"+job.ID+"/chk-", "the third run restores the killed run's latest checkpoint")

	perKey := readPerKey(t, ctx, b, src.OutputTopic)
	assert.Equal(t, 1600, once(perKey, ids), "each of the 1,600 orders exactly once on the output topic, none of the 600 resends")
	assert.Len(t, perKey, 1600, "nothing else on the output topic")
	assertCommittedToTheEnd(t, ctx, b, src, "after the last run")
}

// rowsOf is rows of the order_ids ids; with once, the first of each.
func rowsOf(rows []orders.Order, ids []string, once bool) []orders.Order {
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	var out []orders.Order
	for _, o := range rows {
		if want[o.OrderID] {
			out = append(out, o)
			want[o.OrderID] = !once
		}
	}
	return out
}

// buildRunjob builds cmd/runjob as a user does.
func buildRunjob(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	require.NoError(t, err)
	bin := filepath.Join(t.TempDir(), "runjob")
	build := exec.Command("go", "build", "-o", bin, "./cmd/runjob")
	build.Dir = root
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build ./cmd/runjob: %s", out)
	return bin
}

// runjobProcess is a runjob process and its output so far.
type runjobProcess struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	done chan error
}

func (r *runjobProcess) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out.Write(p)
}

func (r *runjobProcess) output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out.String()
}

// startRunjob starts runjob with args; it is killed at the test's end if
// still running.
func startRunjob(t *testing.T, ctx context.Context, bin string, args []string) *runjobProcess {
	t.Helper()
	r := &runjobProcess{cmd: exec.CommandContext(ctx, bin, args...), done: make(chan error, 1)}
	r.cmd.Stdout, r.cmd.Stderr = r, r
	require.NoError(t, r.cmd.Start())
	go func() { r.done <- r.cmd.Wait() }()
	t.Cleanup(func() {
		r.cmd.Process.Kill()
		if t.Failed() {
			t.Logf("runjob %s:\n%s", strings.Join(args, " "), r.output())
		}
	})
	return r
}

// stop interrupts runjob as Ctrl-C does and waits for its end.
func (r *runjobProcess) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, r.cmd.Process.Signal(os.Interrupt))
	r.wait(t, "Ctrl-C")
	assert.Contains(t, r.output(), "(stopped, with the savepoint file:")
}

// wait waits up to 3 minutes for runjob's end (after what), which must be
// a success.
func (r *runjobProcess) wait(t *testing.T, after string) {
	t.Helper()
	select {
	case err := <-r.done:
		require.NoError(t, err, "runjob ended after %s:\n%s", after, r.output())
	case <-time.After(3 * time.Minute):
		t.Fatalf("runjob not ended 3 minutes after %s:\n%s", after, r.output())
	}
	t.Logf("%s", lastLines(r.output(), 14))
}

// kill kills runjob (kill -9) and waits for its end.
func (r *runjobProcess) kill(t *testing.T) {
	t.Helper()
	require.NoError(t, r.cmd.Process.Kill())
	<-r.done
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

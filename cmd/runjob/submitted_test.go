package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	jobpb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/jobmanagement_v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/internal/jobrun"
	"github.com/beamdedup/beamdedup/pipelines/orders"
	"github.com/beamdedup/beamdedup/testing/jobservertest"
)

// Tests of the submitted-job path, as on Flink and Dataflow: runjob, built
// with go build, submits to a standalone Prism job server (not the one in
// its own process), which stages runjob as the worker binary; Beam Go's
// boot loader fetches it and starts it with --worker in a fresh process,
// from a worker pool (EXTERNAL) or as Prism's PROCESS command. Every step
// has a deadline; a run that waits for one fails the test.

var runjobBuild struct {
	once sync.Once
	path string
	err  error
}

// runjobBinary builds runjob once per test process (stripped, as a staged
// worker binary is best built) into the user cache directory, under a name
// of this checkout's own, and returns its path.
func runjobBinary(t *testing.T) string {
	t.Helper()
	runjobBuild.once.Do(func() {
		dir, err := os.UserCacheDir()
		if err != nil {
			dir = os.TempDir()
		}
		wd, _ := os.Getwd()
		sum := sha256.Sum256([]byte(wd))
		path := filepath.Join(dir, "beamdedup", "runjobtest", "runjob-"+hex.EncodeToString(sum[:6]))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			runjobBuild.err = err
			return
		}
		// A cold build takes minutes on a loaded 2-core machine.
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
		defer cancel()
		tmp := fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
		out, err := exec.CommandContext(ctx, "go", "build", "-ldflags=-s -w", "-o", tmp, ".").CombinedOutput()
		if err != nil {
			os.Remove(tmp)
			runjobBuild.err = fmt.Errorf("building runjob: %v\n%s", err, out)
			return
		}
		runjobBuild.path, runjobBuild.err = path, os.Rename(tmp, path)
	})
	require.NoError(t, runjobBuild.err)
	return runjobBuild.path
}

// withAWorkerPool builds runjob and starts a standalone Prism (its
// endpoint) and a worker pool whose workers run runjob; the copies the
// pool's boot loader makes of it are removed at the end.
func withAWorkerPool(t *testing.T) (bin, endpoint string, pool *jobservertest.WorkerPool) {
	t.Helper()
	bin = runjobBinary(t)
	endpoint = jobservertest.Start(t)
	pool = jobservertest.StartWorkerPool(t)
	jobservertest.RemoveBootCopies(t, bin)
	return bin, endpoint, pool
}

// submitted returns runjob's flags to submit to the job server at
// endpoint with the SDK workers in environment env (config: its
// --environment_config) and runjob as the worker binary.
func submitted(bin, endpoint, env, config string) []string {
	return []string{"--runner=universal", "--endpoint=" + endpoint, "--environment_type=" + env,
		"--environment_config=" + config, "--worker_binary=" + bin}
}

// jobState returns the state of the job called name on the job server.
func jobState(t *testing.T, endpoint, name string) jobpb.JobState_Enum {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	jobs, err := jobrun.Jobs(ctx, endpoint)
	require.NoError(t, err)
	for _, j := range jobs {
		if j.GetJobName() == name {
			return j.GetState()
		}
	}
	return jobpb.JobState_UNSPECIFIED
}

// oneLineOn asserts that stderr is one line and returns it.
func oneLineOn(t *testing.T, stderr string) string {
	t.Helper()
	line := strings.TrimSpace(stderr)
	assert.Equal(t, 1, strings.Count(line, "\n")+1, "one line: %q", stderr)
	return line
}

// A worker pool (EXTERNAL) starts the workers: how Flink on Kubernetes
// runs Go workers, as a sidecar. The orders job is checked as in the
// LOOPBACK tests; the streaming pipeline reads a subscription of the
// pstestserver process until SIGINT, and drains: the workers are in other
// processes, where the stop cannot reach the readers, so runjob waits
// until what was read is acked and published, then cancels the job.
func TestRunSubmittedWithAWorkerPoolAsOnFlink(t *testing.T) {
	if testing.Short() {
		t.Skip("builds runjob, the boot loader and a worker pool; submits jobs to a standalone Prism")
	}
	bin, endpoint, pool := withAWorkerPool(t)
	submit := submitted(bin, endpoint, "EXTERNAL", pool.Addr)

	t.Run("orders", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "orders.jsonl")
		_, wait := asBinary(bin)(t, append(submit, "--count=200", "--output="+out))
		code, stdout, stderr := wait(2 * time.Minute)
		require.Equal(t, 0, code, stderr)
		assert.Contains(t, stdout, "universal via the job server at "+endpoint+" (environment EXTERNAL)")
		assert.Contains(t, stdout, "emitted             200")
		rows, distinct := orderIDs(t, out)
		assert.Equal(t, 200, rows)
		assert.Equal(t, 200, distinct, "exactly one row per distinct order_id")
	})
	t.Run("streaming from a subscription until SIGINT", func(t *testing.T) {
		server := pstestBin(t)
		streamUntilStopped(t, server, asBinary(bin), submit...)
	})
}

// PROCESS on Prism: the boot loader alone never gets a worker going
// (Prism quotes the worker id); runjob cancels the job after the stall
// limit, long before --timeout, and says what to check. With the wrapper
// that strips the quotes, the job runs.
func TestRunSubmittedWithAProcessEnvironmentOnPrism(t *testing.T) {
	if testing.Short() {
		t.Skip("builds runjob and the boot loader; submits jobs to a standalone Prism")
	}
	bin := runjobBinary(t)
	endpoint := jobservertest.Start(t)
	boot, err := jobservertest.BootLoader()
	require.NoError(t, err)
	jobservertest.RemoveBootCopies(t, bin)

	t.Run("the boot loader alone", func(t *testing.T) {
		name := "runjob-test-process-boot"
		args := append(submitted(bin, endpoint, "PROCESS", `{"command":"`+boot+`"}`),
			"--stall_limit=5s", "--job_name="+name, "--output="+filepath.Join(t.TempDir(), "o.jsonl"))
		_, wait := asBinary(bin)(t, args) // --timeout: the default 10 minutes
		code, stdout, stderr := wait(2 * time.Minute)
		assert.Equal(t, 1, code)
		assert.Empty(t, stdout)
		line := oneLineOn(t, stderr)
		assert.Contains(t, line, "runjob: orders pipeline on universal failed after")
		assert.Contains(t, line, "orders job on universal stalled: no SDK worker finished or reported a bundle for ")
		assert.Contains(t, line, "Prism passes it the worker id in quotes")
		assert.Equal(t, jobpb.JobState_CANCELLED, jobState(t, endpoint, name), "cancelled in the runner")
	})
	t.Run("with the wrapper", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "orders.jsonl")
		config := fmt.Sprintf(`{"command":%q,"env":{"BEAM_BOOT":%q}}`, jobservertest.ProcessWrapper(), boot)
		_, wait := asBinary(bin)(t, append(submitted(bin, endpoint, "PROCESS", config), "--count=200", "--output="+out))
		code, stdout, stderr := wait(2 * time.Minute)
		require.Equal(t, 0, code, stderr)
		assert.Contains(t, stdout, "emitted             200")
		rows, distinct := orderIDs(t, out)
		assert.Equal(t, 200, rows)
		assert.Equal(t, 200, distinct)
	})
}

// A worker pool lost in the middle of a job (killed, or hung with its
// connections open): runjob exits 1 with one line, long before --timeout.
// Prism itself fails a job whose worker disconnects during a bundle; a
// worker that hangs is seen only by runjob's watchdog.
func TestRunFailsWithOneLineWhenTheWorkerPoolIsLostMidJob(t *testing.T) {
	if testing.Short() {
		t.Skip("builds runjob, the boot loader and a worker pool; submits jobs to a standalone Prism")
	}
	bin := runjobBinary(t)
	endpoint := jobservertest.Start(t)
	jobservertest.RemoveBootCopies(t, bin)
	for _, tc := range []struct {
		name string
		lose func(*jobservertest.WorkerPool)
		want []string // one of these in the line
	}{
		{"killed", (*jobservertest.WorkerPool).Kill,
			[]string{"SDK worker disconnected", "orders job on universal stalled: no bundle finished"}},
		{"hung", (*jobservertest.WorkerPool).Freeze,
			[]string{"orders job on universal stalled: no bundle finished and no SDK worker reported progress for "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := jobservertest.StartWorkerPool(t)
			name := "runjob-test-lost-pool-" + tc.name
			args := append(submitted(bin, endpoint, "EXTERNAL", pool.Addr), "--stall_limit=10s", "--job_name="+name,
				"--count=150000", "--output="+filepath.Join(t.TempDir(), "o.jsonl"))
			_, wait := asBinary(bin)(t, args)

			// Mid-job: a first bundle committed. 150,000 orders take
			// seconds more after that.
			job, err := jobrun.Follow(endpoint, name)
			require.NoError(t, err)
			defer job.Close()
			deadline := time.Now().Add(2 * time.Minute)
			for {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				c, _ := job.Counters(ctx)
				cancel()
				if c["elements"] > 0 {
					break
				}
				require.True(t, time.Now().Before(deadline), "no bundle of the job committed within 2 minutes")
				time.Sleep(50 * time.Millisecond)
			}
			tc.lose(pool)

			code, stdout, stderr := wait(2 * time.Minute)
			assert.Equal(t, 1, code, stdout)
			line := oneLineOn(t, stderr)
			assert.Contains(t, line, "runjob: orders pipeline on universal failed after")
			found := false
			for _, w := range tc.want {
				found = found || strings.Contains(line, w)
			}
			assert.True(t, found, "%q says none of %q", line, tc.want)
		})
	}
}

// The SDK worker of a streaming job on a worker pool frozen (SIGSTOP):
// nothing commits any more, not even the Pub/Sub source's bundles, which
// a healthy job commits every second with or without messages. runjob
// cancels the job within the stall limit and says which step stopped and
// what to check; before, it read the job as idle and waited until stopped.
func TestRunStreamingOnAWorkerPoolFailsWithinTheStallLimitWhenTheWorkerFreezes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds runjob, the boot loader, a worker pool and pstestserver; streams on a standalone Prism")
	}
	bin, endpoint, pool := withAWorkerPool(t)
	server := pstestBin(t)
	addr := pstestServer(t, server, "--project=p", "--topics=orders,orders-deduped,orders-dlq",
		"--subscriptions=orders-sub:orders,deduped-sub:orders-deduped")
	t.Setenv("PUBSUB_EMULATOR_HOST", addr)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := newClients(t)
	pub, subs := c.pub, c.subs
	var msgs []*pubsubpb.PubsubMessage
	for i := range 50 {
		b, _ := json.Marshal(orders.Order{OrderID: fmt.Sprintf("o-%d", i), Quantity: 1, Price: 1, CreatedAt: time.Unix(int64(i), 0).UTC()})
		msgs = append(msgs, &pubsubpb.PubsubMessage{Data: b})
	}
	_, err := pub.Publish(ctx, &pubsubpb.PublishRequest{Topic: "projects/p/topics/orders", Messages: msgs})
	require.NoError(t, err)

	const limit = 10 * time.Second
	args := append(submitted(bin, endpoint, "EXTERNAL", pool.Addr), "--pipeline=streaming",
		"--subscription=projects/p/subscriptions/orders-sub", "--output_topic=projects/p/topics/orders-deduped",
		"--dead_letter_topic=projects/p/topics/orders-dlq", "--stall_limit="+limit.String(), "--job_name=runjob-test-frozen-stream",
		"--progress=1s")
	_, wait, stderr := startBinary(t, bin, args)
	// Running, and idle: every order out, and published and acked in the
	// counters the watchdog reads (a publish whose counts were not yet
	// reported would be the step it blames).
	for n := 0; n < len(msgs); {
		require.NoError(t, ctx.Err(), "the orders did not reach the output topic")
		n += len(pull(ctx, t, subs, "projects/p/subscriptions/deduped-sub"))
	}
	idle := fmt.Sprintf("acked %d;", len(msgs))
	published := fmt.Sprintf("; %d published (", len(msgs))
	for {
		require.NoError(t, ctx.Err(), "runjob's progress never said every order acked and published:\n%s", stderr())
		var progress string
		for _, l := range strings.Split(stderr(), "\n") {
			if strings.HasPrefix(l, "runjob: read ") {
				progress = l
			}
		}
		if strings.Contains(progress, idle) && strings.Contains(progress, published) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	pool.Freeze()
	t.Cleanup(pool.Thaw) // before the pool's own cleanup kills it
	frozen := time.Now()

	code, stdout, errOut := wait(2 * time.Minute)
	took := time.Since(frozen)
	t.Logf("exit %d %v after the freeze\n%s%s", code, took, stdout, errOut)
	assert.Equal(t, 1, code)
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	last := lines[len(lines)-1]
	assert.Contains(t, last, "runjob: streaming from projects/p/subscriptions/orders-sub failed after")
	assert.Contains(t, last, "streaming job on universal stalled: Pub/Sub source: no bundle committed for ")
	assert.Contains(t, last, "check that a worker pool serves --environment_config="+pool.Addr+", is alive")
	assert.Less(t, took, limit+30*time.Second, "reported within the stall limit (and the watchdog's sampling)")
	assert.Equal(t, jobpb.JobState_CANCELLED, jobState(t, endpoint, "runjob-test-frozen-stream"), "cancelled in the runner")
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	pubsub "cloud.google.com/go/pubsub/v2/apiv1"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/beamdedup/beamdedup/pipelines/orders"
)

func TestRunStreamingRejectsBadPubsubFlagsWithOneLineReason(t *testing.T) {
	const (
		sub = "--subscription=projects/p/subscriptions/in"
		out = "--output_topic=projects/p/topics/out"
		dlq = "--dead_letter_topic=projects/p/topics/dlq"
	)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"short subscription", []string{"--subscription=in", out, dlq}, `--subscription="in" is not a full subscription name; want projects/PROJECT/subscriptions/NAME`},
		{"topic as subscription", []string{"--subscription=projects/p/topics/in", out, dlq}, "(that names a topic)"},
		{"subscription as topic", []string{sub, "--output_topic=projects/p/subscriptions/out", dlq}, `--output_topic="projects/p/subscriptions/out" is not a full topic name (that names a subscription)`},
		{"no project", []string{sub, out, "--dead_letter_topic=projects//topics/dlq"}, "want projects/PROJECT/topics/NAME"},
		{"missing topics", []string{sub}, "needs --subscription, --output_topic and --dead_letter_topic; missing --output_topic, --dead_letter_topic"},
		{"same topic twice", []string{sub, out, "--dead_letter_topic=projects/p/topics/out"}, "dead letters need a topic of their own"},
		{"demo flag", []string{sub, out, dlq, "--count=5"}, "--count does not apply to --pipeline=streaming with --subscription"},
		{"live flag in the demo", []string{"--readers=2"}, "--readers does not apply to --pipeline=streaming: the demo"},
		{"ack deadline", []string{sub, out, dlq, "--ack_deadline=700s"}, "--ack_deadline=11m40s: want 1s to 600s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), append([]string{"--pipeline=streaming"}, tc.args...), &stdout, &stderr)
			assert.Equal(t, 2, code)
			assert.Empty(t, stdout.String())
			assert.Contains(t, stderr.String(), tc.want)
			assert.Equal(t, 1, strings.Count(strings.TrimSpace(stderr.String()), "\n")+1, "one line: %q", stderr.String())
		})
	}
	t.Run("pubsub flag on a file pipeline", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), []string{"--pipeline=orders", sub}, &stdout, &stderr)
		assert.Equal(t, 2, code)
		assert.Contains(t, stderr.String(), "--subscription does not apply to --pipeline=orders; it applies to --pipeline=streaming with --subscription")
	})
}

func TestRunHelpShowsPubsubFlagsAndExample(t *testing.T) {
	var stdout bytes.Buffer
	require.Equal(t, 0, run(context.Background(), []string{"--help"}, &stdout, &bytes.Buffer{}))
	for _, want := range []string{"--subscription=projects/P/subscriptions/orders-sub", "--output_topic=", "--dead_letter_topic=",
		"--drain_timeout=", "--ack_deadline=", "--readers=", "--stall_limit", "PUBSUB_EMULATOR_HOST"} {
		assert.Contains(t, stdout.String(), want)
	}
}

// pstestServer starts the built pstestserver bin on a free loopback port
// and returns its address; it is interrupted when the test ends.
func pstestServer(t *testing.T, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"--port=0"}, args...)...)
	addr, err := launchPstest(cmd)
	require.NoError(t, err)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
		}
	})
	return addr
}

// drainSub pulls and acks everything subscription delivers until it has
// been empty for quiet.
func drainSub(ctx context.Context, t *testing.T, c *pubsub.SubscriptionAdminClient, sub string, quiet time.Duration) []*pubsubpb.PubsubMessage {
	t.Helper()
	var got []*pubsubpb.PubsubMessage
	last := time.Now()
	for time.Since(last) < quiet && ctx.Err() == nil {
		msgs := pull(ctx, t, c, sub)
		if len(msgs) > 0 {
			got = append(got, msgs...)
			last = time.Now()
		}
	}
	return got
}

// pull returns (and acks) what one Pull delivers within a second.
func pull(ctx context.Context, t *testing.T, c *pubsub.SubscriptionAdminClient, sub string) []*pubsubpb.PubsubMessage {
	t.Helper()
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	resp, err := c.Pull(pctx, &pubsubpb.PullRequest{Subscription: sub, MaxMessages: 1000})
	if code := status.Code(err); err != nil && (code == codes.DeadlineExceeded || pctx.Err() != nil) {
		return nil
	}
	require.NoError(t, err)
	var ids []string
	var msgs []*pubsubpb.PubsubMessage
	for _, m := range resp.GetReceivedMessages() {
		ids = append(ids, m.GetAckId())
		msgs = append(msgs, m.GetMessage())
	}
	if len(ids) > 0 {
		require.NoError(t, c.Acknowledge(ctx, &pubsubpb.AcknowledgeRequest{Subscription: sub, AckIds: ids}))
	}
	return msgs
}

// safeBuffer is a bytes.Buffer written by runjob's goroutines and read by the test.
type safeBuffer struct {
	lockedWriter
	buf bytes.Buffer
}

func newSafeBuffer() *safeBuffer {
	s := &safeBuffer{}
	s.w = &s.buf
	return s
}

func (s *safeBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// startFunc starts runjob with args; stop does what Ctrl-C does, and wait
// returns runjob's exit code and output once it exited (failing the test
// after timeout).
type startFunc func(t *testing.T, args []string) (stop func(), wait func(timeout time.Duration) (code int, stdout, stderr string))

// inProcess runs runjob's run function; the stop cancels its context, as
// main's signal handler does.
func inProcess(t *testing.T, args []string) (func(), func(time.Duration) (int, string, string)) {
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	stdout, stderr := newSafeBuffer(), newSafeBuffer()
	exit := make(chan int, 1)
	go func() { exit <- run(ctx, args, stdout, stderr) }()
	return stop, func(timeout time.Duration) (int, string, string) {
		select {
		case code := <-exit:
			return code, stdout.String(), stderr.String()
		case <-time.After(timeout):
			require.FailNow(t, "runjob did not exit in time", stderr.String())
			return 0, "", ""
		}
	}
}

// asBinary runs a built runjob; the stop is a SIGINT.
func asBinary(bin string) startFunc {
	return func(t *testing.T, args []string) (func(), func(time.Duration) (int, string, string)) {
		stop, wait, _ := startBinary(t, bin, args)
		return stop, wait
	}
}

// startBinary runs bin as asBinary does, and returns as well what it has
// printed on stderr so far.
func startBinary(t *testing.T, bin string, args []string) (func(), func(time.Duration) (int, string, string), func() string) {
	stdout, stderr := newSafeBuffer(), newSafeBuffer()
	start := func(t *testing.T, args []string) (func(), func(time.Duration) (int, string, string)) {
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = stdout, stderr
		require.NoError(t, cmd.Start())
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		t.Cleanup(func() { cmd.Process.Kill() })
		return func() { cmd.Process.Signal(os.Interrupt) }, func(timeout time.Duration) (int, string, string) {
			select {
			case <-exited:
				return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
			case <-time.After(timeout):
				cmd.Process.Kill()
				require.FailNow(t, "runjob did not exit in time", stderr.String())
				return 0, "", ""
			}
		}
	}
	stop, wait := start(t, args)
	return stop, wait, stderr.String
}

// The tool end to end: the standalone emulator process, a stream with
// exact duplicates, publisher retries and undecodable payloads published
// before and while the job runs, then the stop signal; runjob as a function
// (stopped by cancelling its context) and as a binary (stopped by SIGINT).
func TestRunStreamingFromSubscriptionUntilStoppedAcksEverythingAndExitsCleanly(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts the pstestserver emulator and runjob, streams for tens of seconds")
	}
	server := pstestBin(t)
	for _, tc := range []struct {
		name  string
		start func(t *testing.T) startFunc
	}{
		{"function, context cancelled", func(*testing.T) startFunc { return inProcess }},
		{"binary, SIGINT", func(t *testing.T) startFunc { return asBinary(runjobBinary(t)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := tc.start(t)
			streamUntilStopped(t, server, start)
		})
	}
}

// streamUntilStopped runs runjob (start) against a subscription of the
// pstestserver process (server), with extra flags, checks the run and
// stops it.
func streamUntilStopped(t *testing.T, server string, start startFunc, extra ...string) {
	addr := pstestServer(t, server, "--project=p", "--min_ack_deadline=1s", "--ack_deadline=10s",
		"--topics=orders,orders-deduped,orders-dlq",
		"--subscriptions=orders-sub:orders,deduped-sub:orders-deduped,dlq-sub:orders-dlq")
	t.Setenv("PUBSUB_EMULATOR_HOST", addr)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := newClients(t)
	pub, subs := c.pub, c.subs

	published := 0
	publish := func(msgs ...*pubsubpb.PubsubMessage) {
		_, err := pub.Publish(ctx, &pubsubpb.PublishRequest{Topic: "projects/p/topics/orders", Messages: msgs})
		require.NoError(t, err)
		published += len(msgs)
	}
	order := func(i int) []byte {
		b, _ := json.Marshal(orders.Order{OrderID: fmt.Sprintf("o-%03d", i), Quantity: 1, Price: float64(i), CreatedAt: time.Unix(int64(i), 0).UTC()})
		return b
	}
	// Keys 0..79 now, 80..99 while the job runs; every third key published
	// twice (exact duplicate), every fifth retried with a new message id.
	batch := func(from, to int) {
		var msgs []*pubsubpb.PubsubMessage
		for i := from; i < to; i++ {
			msgs = append(msgs, &pubsubpb.PubsubMessage{Data: order(i)})
			if i%3 == 0 {
				msgs = append(msgs, &pubsubpb.PubsubMessage{Data: order(i)})
			}
			if i%5 == 0 {
				msgs = append(msgs, &pubsubpb.PubsubMessage{Data: order(i), Attributes: map[string]string{"retry": "1"}})
			}
		}
		publish(msgs...)
	}
	const keys = 100
	batch(0, 80)
	publish(&pubsubpb.PubsubMessage{Data: []byte("not json")}, &pubsubpb.PubsubMessage{Data: []byte(`{"order_id": "broken`)})

	names := append([]string{"--pipeline=streaming", "--output_topic=projects/p/topics/orders-deduped", "--dead_letter_topic=projects/p/topics/orders-dlq"}, extra...)
	names = names[:len(names):len(names)]
	t.Run("missing subscription fails before the job", func(t *testing.T) {
		_, wait := start(t, append(names, "--subscription=projects/p/subscriptions/nope"))
		code, _, stderr := wait(time.Minute)
		assert.Equal(t, 1, code)
		assert.Contains(t, stderr, "subscription projects/p/subscriptions/nope does not exist on emulator at "+addr)
	})

	stop, wait := start(t, append(names, "--subscription=projects/p/subscriptions/orders-sub",
		"--ack_deadline=3s", "--drain_timeout=60s", "--progress=2s"))

	// Read the output as a consumer would; publish the rest once the job
	// has produced something, so it must keep running to see it.
	out := map[string]int{}
	outputs := 0
	collect := func(msgs []*pubsubpb.PubsubMessage) {
		for _, m := range msgs {
			var o orders.Order
			require.NoError(t, json.Unmarshal(m.GetData(), &o), string(m.GetData()))
			out[o.OrderID]++
			outputs++
		}
	}
	for len(out) < 80 && ctx.Err() == nil {
		collect(pull(ctx, t, subs, "projects/p/subscriptions/deduped-sub"))
	}
	// Late duplicates of keys already out, then new keys. A Pull takes all
	// there is (up to 1000), so once the new keys are out the job has read
	// every message.
	batch(0, 10)
	batch(80, 100)
	for len(out) < keys && ctx.Err() == nil {
		collect(pull(ctx, t, subs, "projects/p/subscriptions/deduped-sub"))
	}
	require.Len(t, out, keys, "every key on the output topic while the job runs")

	stop()
	code, stdout, stderr := wait(90 * time.Second)
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
	require.Equal(t, 0, code, "clean exit")
	assert.Contains(t, stderr, "runjob: stopping: no more pulls")
	assert.Contains(t, stdout, "(stopped, drained)")
	assert.Contains(t, stdout, "emulator at "+addr+" (PUBSUB_EMULATOR_HOST)")

	// One output per key, also counting what came after the stop.
	collect(drainSub(ctx, t, subs, "projects/p/subscriptions/deduped-sub", 2*time.Second))
	assert.Equal(t, keys, outputs, "one output message per key")
	for k, n := range out {
		assert.Equal(t, 1, n, "outputs of %s", k)
	}
	// Both undecodable payloads dead-lettered, with the reason.
	dead := drainSub(ctx, t, subs, "projects/p/subscriptions/dlq-sub", 2*time.Second)
	require.Len(t, dead, 2)
	for _, m := range dead {
		assert.Contains(t, m.GetAttributes()["dlq_reason"], "invalid JSON")
	}
	// Every input message acked: with leases of 3s, an unacked one would be
	// redelivered within seconds.
	left := drainSub(ctx, t, subs, "projects/p/subscriptions/orders-sub", 6*time.Second)
	assert.Empty(t, left, "input messages never acked by the job")

	read, acked := summaryCounts(t, stdout)
	assert.Equal(t, read, acked, "every message read was acked")
	assert.GreaterOrEqual(t, read, published)
	assert.Contains(t, stdout, "emitted             "+strconv.Itoa(keys)+"\n")
	assert.Contains(t, stdout, "dead-lettered       2\n")
}

var readLine = regexp.MustCompile(`messages read +(\d+) \(redeliveries included\), (\d+) acked`)

func summaryCounts(t *testing.T, stdout string) (read, acked int) {
	t.Helper()
	m := readLine.FindStringSubmatch(stdout)
	require.NotNil(t, m, stdout)
	read, _ = strconv.Atoi(m[1])
	acked, _ = strconv.Atoi(m[2])
	return read, acked
}

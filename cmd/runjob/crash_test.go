package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	pubsub "cloud.google.com/go/pubsub/v2/apiv1"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/beamdedup/beamdedup/pipelines/orders"
	"github.com/beamdedup/beamdedup/testing/pgtest"
)

// Crash tests of the streaming pipeline against a subscription, as a user
// meets the faults: the Pub/Sub server (pstestserver) and runjob (built
// with go build) are separate processes; runjob is killed with SIGKILL,
// its SDK worker too, the output topic is deleted under it; every step has
// a deadline, and every output message is counted per order. The promise:
// a message is acked only once its row is safe, so no order is ever lost;
// a restart publishes again at most the orders that had a message unacked
// at the kill. The package's tests share one pstestserver process and one
// runjob binary. docs/streaming-reliability.md has the table of what they
// measured.

// crashOrders is the backlog of the kill tests: above the 10,000 messages
// that the source used to ack ahead of the output.
const crashOrders = 12000

var sharedServer struct {
	once sync.Once
	srv  *pstestProcess
	err  error
}

var pstestBuild struct {
	once sync.Once
	bin  string
	err  error
}

// pstestProcess is a running pstestserver.
type pstestProcess struct {
	cmd   *exec.Cmd
	addr  string
	stdin io.WriteCloser // the server exits when it closes (or is collected)
}

// pstestBinary builds pstestserver once per test binary and returns its
// path.
func pstestBinary() (string, error) {
	pstestBuild.once.Do(func() {
		dir, err := os.MkdirTemp("", "pstestserver")
		if err != nil {
			pstestBuild.err = err
			return
		}
		pstestBuild.bin = filepath.Join(dir, "pstestserver")
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
		defer cancel()
		if out, err := exec.CommandContext(ctx, "go", "build", "-o", pstestBuild.bin, "../../testing/pubsubtest/cmd/pstestserver").CombinedOutput(); err != nil {
			pstestBuild.err = fmt.Errorf("building pstestserver: %v\n%s", err, out)
		}
	})
	return pstestBuild.bin, pstestBuild.err
}

// pstestBin is pstestBinary for a test.
func pstestBin(tb testing.TB) string {
	tb.Helper()
	bin, err := pstestBinary()
	require.NoError(tb, err)
	return bin
}

// startPstest starts a pstestserver on a free port, with a lease minimum
// of 1s; it runs until its stdin, a pipe from this process, closes: at the
// latest when the test binary exits.
func startPstest() (*pstestProcess, error) {
	bin, err := pstestBinary()
	if err != nil {
		return nil, err
	}
	p := &pstestProcess{cmd: exec.Command(bin, "--port=0", "--min_ack_deadline=1s", "--exit_on_stdin_eof")}
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if p.addr, err = launchPstest(p.cmd); err != nil {
		return nil, err
	}
	return p, nil
}

// launchPstest starts cmd, a pstestserver on a free port, and returns the
// address it prints once it serves; it kills a server that does not say
// within 30s, or says something else.
func launchPstest(cmd *exec.Cmd) (string, error) {
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	if err := cmd.Start(); err != nil {
		return "", err
	}
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- l
	}()
	select {
	case l := <-line:
		if addr, ok := strings.CutPrefix(strings.TrimSpace(l), "PUBSUB_EMULATOR_HOST="); ok {
			return addr, nil
		}
		cmd.Process.Kill()
		return "", fmt.Errorf("pstestserver printed %q", l)
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		return "", fmt.Errorf("pstestserver did not start within 30s")
	}
}

// sharedPubsub returns the package's one pstestserver, started on first
// use, and sets PUBSUB_EMULATOR_HOST for the test.
func sharedPubsub(t *testing.T) string {
	t.Helper()
	sharedServer.once.Do(func() { sharedServer.srv, sharedServer.err = startPstest() })
	require.NoError(t, sharedServer.err)
	t.Setenv("PUBSUB_EMULATOR_HOST", sharedServer.srv.addr)
	return sharedServer.srv.addr
}

// crashNames are a test's own topics and subscriptions on the shared
// server.
type crashNames struct {
	in, out, dlq    string // topics
	sub, outSub     string // subscriptions of in and out
	project, prefix string
}

func (n crashNames) flags() []string {
	return []string{"--pipeline=streaming", "--subscription=" + n.sub, "--output_topic=" + n.out, "--dead_letter_topic=" + n.dlq}
}

// pubsubClients are clients of the shared server for the test.
type pubsubClients struct {
	pub  *pubsub.TopicAdminClient
	subs *pubsub.SubscriptionAdminClient
}

func newClients(t *testing.T) pubsubClients {
	ctx := context.Background()
	pub, err := pubsub.NewTopicAdminClient(ctx)
	require.NoError(t, err)
	subs, err := pubsub.NewSubscriptionAdminClient(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { pub.Close(); subs.Close() })
	return pubsubClients{pub, subs}
}

// setUps numbers the calls of setUp, so that a test run again in the
// same process (-count) gets names of its own on the shared emulator.
var setUps atomic.Int64

// setUp creates the test's topics and subscriptions (ack deadline 10s,
// the fake's default), named after prefix.
func (c pubsubClients) setUp(t *testing.T, prefix string) crashNames {
	ctx := context.Background()
	prefix = fmt.Sprintf("%s-%d", prefix, setUps.Add(1))
	p := "projects/crash"
	n := crashNames{in: p + "/topics/" + prefix + "-in", out: p + "/topics/" + prefix + "-out", dlq: p + "/topics/" + prefix + "-dlq",
		sub: p + "/subscriptions/" + prefix + "-in-sub", outSub: p + "/subscriptions/" + prefix + "-out-sub", project: p, prefix: prefix}
	for _, topic := range []string{n.in, n.out, n.dlq} {
		_, err := c.pub.CreateTopic(ctx, &pubsubpb.Topic{Name: topic})
		require.NoError(t, err)
	}
	c.subscribe(t, n.sub, n.in)
	c.subscribe(t, n.outSub, n.out)
	return n
}

func (c pubsubClients) subscribe(t *testing.T, sub, topic string) {
	_, err := c.subs.CreateSubscription(context.Background(), &pubsubpb.Subscription{Name: sub, Topic: topic,
		AckDeadlineSeconds: 10, MessageRetentionDuration: durationpb.New(24 * time.Hour)})
	require.NoError(t, err)
}

// publishOrders publishes orders from..to-1 to topic: every third one
// twice (an exact duplicate), every fifth once more as a publisher retry
// (same payload, new message id). It returns the number of messages.
func (c pubsubClients) publishOrders(t *testing.T, topic string, from, to int) int {
	var msgs []*pubsubpb.PubsubMessage
	n := 0
	flush := func() {
		if len(msgs) == 0 {
			return
		}
		_, err := c.pub.Publish(context.Background(), &pubsubpb.PublishRequest{Topic: topic, Messages: msgs})
		assert.NoError(t, err) // assert: the steady stream publishes from a goroutine
		n += len(msgs)
		msgs = msgs[:0]
	}
	for i := from; i < to; i++ {
		b, _ := json.Marshal(orders.Order{OrderID: fmt.Sprintf("o-%06d", i), Quantity: 1, Price: float64(i%500) + 0.5, CreatedAt: time.Unix(int64(i), 0).UTC()})
		msgs = append(msgs, &pubsubpb.PubsubMessage{Data: b})
		if i%3 == 0 {
			msgs = append(msgs, &pubsubpb.PubsubMessage{Data: b})
		}
		if i%5 == 0 {
			msgs = append(msgs, &pubsubpb.PubsubMessage{Data: b, Attributes: map[string]string{"retry": "1"}})
		}
		if len(msgs) >= 900 {
			flush()
		}
	}
	flush()
	return n
}

// outputCount counts the output messages per order, pulled (and acked)
// from a subscription of the output topic by a goroutine, as a consumer
// would.
type outputCount struct {
	mu     sync.Mutex
	per    map[string]int
	total  int
	empty  int // pulls that brought nothing (an empty answer, or none in time)
	cancel context.CancelFunc
	done   chan struct{}
}

// consume starts counting what sub delivers; stop ends it.
func (c pubsubClients) consume(t *testing.T, sub string, into *outputCount) {
	ctx, cancel := context.WithCancel(context.Background())
	into.mu.Lock()
	if into.per == nil {
		into.per = map[string]int{}
	}
	into.cancel, into.done = cancel, make(chan struct{})
	into.mu.Unlock()
	go func() {
		defer close(into.done)
		for ctx.Err() == nil {
			pctx, pcancel := context.WithTimeout(ctx, time.Second)
			resp, err := c.subs.Pull(pctx, &pubsubpb.PullRequest{Subscription: sub, MaxMessages: 1000})
			pcancel()
			if err != nil || len(resp.GetReceivedMessages()) == 0 {
				into.mu.Lock()
				into.empty++ // a timeout, an empty answer, or the test ending
				into.mu.Unlock()
				continue
			}
			var ids []string
			into.mu.Lock()
			for _, m := range resp.GetReceivedMessages() {
				ids = append(ids, m.GetAckId())
				var o orders.Order
				if json.Unmarshal(m.GetMessage().GetData(), &o) == nil {
					into.per[o.OrderID]++
					into.total++
				}
			}
			into.mu.Unlock()
			if len(ids) > 0 {
				c.subs.Acknowledge(context.Background(), &pubsubpb.AcknowledgeRequest{Subscription: sub, AckIds: ids})
			}
		}
	}()
	t.Cleanup(into.stop)
}

// caughtUp waits until the consumer has pulled everything the
// subscription holds now: two pulls that brought nothing, one of them
// sent after this call. Call it once what publishes to the topic has
// ended.
func (o *outputCount) caughtUp(t *testing.T) {
	t.Helper()
	o.mu.Lock()
	from := o.empty
	o.mu.Unlock()
	waitFor(t, time.Minute, "the consumer to pull everything the output holds", func() bool {
		o.mu.Lock()
		defer o.mu.Unlock()
		return o.empty >= from+2
	})
}

func (o *outputCount) stop() {
	if o.cancel != nil {
		o.cancel()
		<-o.done
	}
}

func (o *outputCount) distinct() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.per)
}

// verdict is what the output says of orders 0..n-1: the orders never
// output and the orders output more than once.
func (o *outputCount) verdict(n int) (lost, doubled []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for i := range n {
		id := fmt.Sprintf("o-%06d", i)
		switch c := o.per[id]; {
		case c == 0:
			lost = append(lost, id)
		case c > 1:
			doubled = append(doubled, id)
		}
	}
	return lost, doubled
}

// waitFor polls cond every 100ms until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			require.FailNow(t, "timed out after "+d.String()+" waiting for "+what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// runjobProcess is a running runjob binary.
type runjobProcess struct {
	cmd            *exec.Cmd
	stdout, stderr *safeBuffer
	exited         chan struct{}
}

func startRunjob(t *testing.T, args ...string) *runjobProcess {
	t.Helper()
	p := &runjobProcess{stdout: newSafeBuffer(), stderr: newSafeBuffer(), exited: make(chan struct{})}
	p.cmd = exec.Command(runjobBinary(t), args...)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	require.NoError(t, p.cmd.Start())
	go func() { p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.exited
		if t.Failed() {
			lines := strings.Split(strings.TrimSpace(p.stderr.String()), "\n")
			t.Logf("runjob %v, the end of its stderr:\n%s\nstdout:\n%s", args, strings.Join(lines[max(0, len(lines)-15):], "\n"), p.stdout.String())
		}
	})
	return p
}

// interrupt sends SIGINT as Ctrl-C does, once runjob says what it reads:
// its handler is installed by then. A restarted run may find its work done
// by the killed one and be stopped at once; a SIGINT before the handler
// would kill it (exit -1) instead of draining it.
func (p *runjobProcess) interrupt(t *testing.T) {
	t.Helper()
	waitFor(t, time.Minute, "runjob to say what it reads", func() bool {
		return strings.Contains(p.stderr.String(), "runjob: reading ")
	})
	require.NoError(t, p.cmd.Process.Signal(os.Interrupt))
}

// wait returns runjob's exit code once it exited, failing the test after d.
func (p *runjobProcess) wait(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case <-p.exited:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(d):
		p.cmd.Process.Kill()
		require.FailNow(t, "runjob did not exit within "+d.String(), p.stderr.String())
		return 0
	}
}

// progressLine is a progress line of a streaming run (acked, published)
// or a Kafka run (safe, written).
var progressLine = regexp.MustCompile(`runjob: read (\d+), (?:acked|safe) (\d+); dedup: (\d+) in, (\d+) emitted, (\d+) duplicates dropped; (\d+) dead-lettered; (\d+) (?:published|written)`)

// progress is runjob's last progress line (acked: acked or safe;
// published: published or written).
type progress struct{ read, acked, in, emitted, dropped, dead, published int }

func (p *runjobProcess) progress() progress {
	all := progressLine.FindAllStringSubmatch(p.stderr.String(), -1)
	if len(all) == 0 {
		return progress{}
	}
	m := all[len(all)-1]
	v := make([]int, 8)
	for i := 1; i < 8; i++ {
		v[i], _ = strconv.Atoi(m[i])
	}
	return progress{v[1], v[2], v[3], v[4], v[5], v[6], v[7]}
}

// inFlight: the kill must come while much more has been read than
// published, the window in which a source that acks at its own commit
// loses orders.
func (p progress) inFlight() bool {
	return p.read >= 6000 && p.read-p.published >= 3000 && p.published >= 100
}

// finish lets the restarted runjob publish every order (the consumer sees
// all n), then stops it with SIGINT: it must drain and exit 0. It returns
// the summary's messages read.
func finish(t *testing.T, p *runjobProcess, out *outputCount, n int) int {
	t.Helper()
	waitFor(t, 3*time.Minute, "every order on the output topic after the restart", func() bool { return out.distinct() >= n })
	// The drain publishes whatever the run read before it exits: doubles
	// still on their way included (checkOutput counts them).
	p.interrupt(t)
	code := p.wait(t, 2*time.Minute)
	require.Equal(t, 0, code, "the restarted run drains and exits 0\nstdout:\n%s\nstderr:\n%s", p.stdout.String(), p.stderr.String())
	require.Contains(t, p.stdout.String(), "(stopped, drained)")
	read, acked := summaryCounts(t, p.stdout.String())
	assert.Equal(t, read, acked, "every message the restarted run read was acked")
	return read
}

// startWithABacklogInFlight starts runjob and waits until it has read far
// ahead of what it published (progress.inFlight), the moment to kill it.
func startWithABacklogInFlight(t *testing.T, args ...string) (*runjobProcess, progress) {
	t.Helper()
	p := startRunjob(t, args...)
	waitFor(t, 3*time.Minute, "a backlog in flight (read far ahead of published)", func() bool {
		select {
		case <-p.exited:
			require.FailNow(t, "runjob exited before the kill", p.stderr.String())
		default:
		}
		return p.progress().inFlight()
	})
	return p, p.progress()
}

// restartAndCheck runs runjob again on the same subscription after a
// failure, lets it publish every order and drain (finish), and checks the
// output (checkOutput): the messages it read again, and the orders output
// twice.
func restartAndCheck(t *testing.T, args []string, out *outputCount, n int) (second *runjobProcess, reread, doubled int) {
	t.Helper()
	second = startRunjob(t, args...)
	reread = finish(t, second, out, n)
	return second, reread, checkOutput(t, out, n, reread)
}

// checkOutput asserts, once the consumer has pulled everything the
// exited run published, that no order is lost and that the doubles are at
// most what was unacked at the kill (which the restarted run read again),
// and returns the numbers for the log.
func checkOutput(t *testing.T, out *outputCount, n, rereadAfterKill int) (doubled int) {
	t.Helper()
	out.caughtUp(t)
	out.stop()
	lost, doubles := out.verdict(n)
	assert.Empty(t, lost, "orders never output: %d of %d", len(lost), n)
	assert.LessOrEqual(t, len(doubles), rereadAfterKill, "an order output twice was read again after the kill")
	return len(doubles)
}

func TestCrash_KillWithABacklogInFlightLosesNoOrder(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts runjob on a 12,000-order backlog (CI runs it)")
	}
	sharedPubsub(t)
	c := newClients(t)
	n := c.setUp(t, "kill")
	msgs := c.publishOrders(t, n.in, 0, crashOrders)
	out := &outputCount{}
	c.consume(t, n.outSub, out)
	args := append(n.flags(), "--ack_deadline=5s", "--progress=250ms", "--drain_timeout=90s")

	first, at := startWithABacklogInFlight(t, args...)
	require.NoError(t, first.cmd.Process.Signal(syscall.SIGKILL))
	first.wait(t, 30*time.Second)
	t.Logf("killed at: %+v (%d messages for %d orders)", at, msgs, crashOrders)

	_, reread, doubled := restartAndCheck(t, args, out, crashOrders)
	t.Logf("restart read %d messages again; %d of %d orders output twice", reread, doubled, crashOrders)
}

func TestCrash_KillTheSDKWorkerOfAWorkerPoolLosesNoOrder(t *testing.T) {
	if testing.Short() {
		t.Skip("a standalone Prism and a worker pool; kills the SDK worker on a backlog (CI runs it)")
	}
	sharedPubsub(t)
	c := newClients(t)
	n := c.setUp(t, "pool")
	bin, endpoint, pool := withAWorkerPool(t)
	const orderCount = 10000
	c.publishOrders(t, n.in, 0, orderCount)
	out := &outputCount{}
	c.consume(t, n.outSub, out)
	args := append(append(n.flags(), submitted(bin, endpoint, "EXTERNAL", pool.Addr)...),
		"--ack_deadline=5s", "--progress=250ms", "--drain_timeout=90s")

	first, at := startWithABacklogInFlight(t, args...)
	workers := sdkWorkers(t)
	require.NotEmpty(t, workers, "the pool's SDK worker process")
	for _, pid := range workers {
		require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	}
	code := first.wait(t, 2*time.Minute)
	stderr := first.stderr.String()
	t.Logf("killed the SDK worker at %+v; runjob exited %d: %s", at, code, stderr[strings.LastIndex(strings.TrimSpace(stderr), "\n")+1:])
	assert.Equal(t, 1, code, "runjob reports the job failed with its worker")

	_, reread, doubled := restartAndCheck(t, args, out, orderCount)
	t.Logf("restart read %d messages again; %d of %d orders output twice", reread, doubled, orderCount)
}

// sdkWorkers returns the SDK worker processes among this process's
// descendants (the boot loader starts them with the argument
// --worker=true), so that only workers this test started are killed.
func sdkWorkers(t *testing.T) []int {
	t.Helper()
	parent := map[int]int{}
	cmdline := map[int]string{}
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so cut at the last ')'.
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) < 2 {
			continue
		}
		parent[pid], _ = strconv.Atoi(fields[1])
		b, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		cmdline[pid] = string(b)
	}
	me := os.Getpid()
	mine := func(pid int) bool {
		for p := parent[pid]; p > 1; p = parent[p] {
			if p == me {
				return true
			}
		}
		return false
	}
	var pids []int
	for pid, cl := range cmdline {
		if strings.Contains(cl, "\x00--worker=true\x00") && mine(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func TestCrash_OutputTopicDeletedMidRunFailsTheJobAndARerunLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("deletes the output topic under a running runjob (CI runs it)")
	}
	sharedPubsub(t)
	c := newClients(t)
	n := c.setUp(t, "deleted")
	const orderCount = 3000
	// A steady stream while the job runs: 3,000 orders over about 10s.
	published := make(chan struct{})
	go func() {
		defer close(published)
		for from := 0; from < orderCount; from += 100 {
			c.publishOrders(t, n.in, from, from+100)
			time.Sleep(330 * time.Millisecond)
		}
	}()
	out := &outputCount{}
	c.consume(t, n.outSub, out)
	args := append(n.flags(), "--ack_deadline=5s", "--progress=500ms")

	first := startRunjob(t, args...)
	waitFor(t, 2*time.Minute, "output from the first run", func() bool { return out.distinct() >= 300 })
	err := c.pub.DeleteTopic(context.Background(), &pubsubpb.DeleteTopicRequest{Topic: n.out})
	require.NoError(t, err)
	code := first.wait(t, 2*time.Minute)
	stderr := first.stderr.String()
	t.Logf("runjob exited %d:\n%s", code, stderr[max(0, len(stderr)-1500):])
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "publish of")
	assert.Contains(t, stderr, "NotFound")
	assert.Contains(t, stderr, "unacked, so their input is redelivered")
	assert.Contains(t, stderr, "nothing the job had not published was acked")

	// The topic back (a new one of the same name, with a new subscription),
	// the rest of the stream published, a rerun.
	<-published
	_, err = c.pub.CreateTopic(context.Background(), &pubsubpb.Topic{Name: n.out})
	require.NoError(t, err)
	c.subscribe(t, n.outSub+"-2", n.out)
	out.caughtUp(t) // what the old subscription still had
	out.stop()
	c.consume(t, n.outSub+"-2", out)
	_, reread, doubled := restartAndCheck(t, args, out, orderCount)
	t.Logf("rerun read %d messages again; %d of %d orders output twice", reread, doubled, orderCount)
}

func TestCrash_KillWithABacklogWritingToPostgresLeavesEveryOrderInTheTableOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts runjob on a backlog, writing to a throwaway PostgreSQL (CI runs it)")
	}
	cluster := pgtest.Shared(t)
	dsn := cluster.NewDatabase(t)
	sharedPubsub(t)
	c := newClients(t)
	n := c.setUp(t, "postgres")
	const orderCount = 10000
	c.publishOrders(t, n.in, 0, orderCount)
	out := &outputCount{}
	c.consume(t, n.outSub, out)
	args := append(n.flags(), "--postgres="+dsn, "--ack_deadline=5s", "--progress=250ms", "--drain_timeout=90s")

	first, at := startWithABacklogInFlight(t, args...)
	require.NoError(t, first.cmd.Process.Signal(syscall.SIGKILL))
	first.wait(t, 30*time.Second)

	second, reread, doubled := restartAndCheck(t, args, out, orderCount)
	t.Logf("killed at %+v; restart read %d messages again; %d of %d orders output twice", at, reread, doubled, orderCount)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var rows, distinct, inRange int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*), count(DISTINCT order_id),
		count(*) FILTER (WHERE order_id BETWEEN 'o-000000' AND $1) FROM orders`, fmt.Sprintf("o-%06d", orderCount-1)).Scan(&rows, &distinct, &inRange))
	assert.Equal(t, orderCount, rows, "one row per order")
	assert.Equal(t, orderCount, distinct)
	assert.Equal(t, orderCount, inRange, "every order published is in the table")
	assert.Contains(t, second.stdout.String(), "postgres            ")
}

// A Pub/Sub service that stops answering (its process frozen with
// SIGSTOP): the watchdog reports the step that waits on it (the source,
// whose Pull is not answered, or a step whose publish or acks hang), and
// the message names the service, not a Prism defect or the job server.
func TestCrash_AFrozenPubsubServiceIsReportedAsTheStepThatWaitsOnIt(t *testing.T) {
	if testing.Short() {
		t.Skip("freezes a pstestserver of its own under a running runjob (CI runs it)")
	}
	srv, err := startPstest()
	require.NoError(t, err)
	t.Cleanup(func() {
		srv.cmd.Process.Signal(syscall.SIGCONT)
		srv.cmd.Process.Kill()
		srv.cmd.Wait()
	})
	t.Setenv("PUBSUB_EMULATOR_HOST", srv.addr)
	c := newClients(t)
	n := c.setUp(t, "frozen")
	c.publishOrders(t, n.in, 0, 3000)
	out := &outputCount{}
	c.consume(t, n.outSub, out)

	p := startRunjob(t, append(n.flags(), "--ack_deadline=5s", "--progress=500ms", "--stall_limit=5s")...)
	waitFor(t, 2*time.Minute, "output before the freeze", func() bool { return out.distinct() >= 1 })
	out.stop()
	c.publishOrders(t, n.in, 3000, 6000) // work in flight when the service stops
	require.NoError(t, srv.cmd.Process.Signal(syscall.SIGSTOP))
	start := time.Now()
	code := p.wait(t, 2*time.Minute)
	stderr := p.stderr.String()
	line := stderr[strings.LastIndex(strings.TrimSpace(stderr), "\n")+1:]
	t.Logf("runjob exited %d after %v: %s", code, time.Since(start).Round(time.Second), line)
	assert.Equal(t, 1, code)
	assert.Contains(t, line, "stalled: ")
	// Each step's hint names the service: the source's reader ("check that
	// the Pub/Sub service (…) answers"), or the source's bundle, the publish
	// or KeepFirst's acks ("… wait on Pub/Sub (…): check that the service
	// answers"), whichever the watchdog found stalled first.
	assert.Regexp(t, `Pub/Sub (service )?\(emulator at `+regexp.QuoteMeta(srv.addr)+`\)(:| or on a step fused with it:)? (check that the service )?(answers|does not answer)`, line)
}

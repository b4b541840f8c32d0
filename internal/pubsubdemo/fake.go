package pubsubdemo

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// FakeCommand runs the Pub/Sub fake from the module's source: what runjob
// starts when it is not told a built one. It works where the go command
// and this module's source are (the repository, where runjob is run from).
var FakeCommand = []string{"go", "run", "github.com/beamdedup/beamdedup/testing/pubsubtest/cmd/pstestserver"}

// project is the demo's project on the fake.
const project = "demo"

// A Fake is the Pub/Sub fake playing the demo in a process of its own,
// on a loopback port (Addr): the SDK workers of a job on this machine
// reach it. It ends when Close closes its stdin, or when this process
// ends.
type Fake struct {
	Addr string

	cmd   *exec.Cmd
	in    io.WriteCloser
	out   *bufio.Reader
	mu    sync.Mutex // one command at a time
	ended chan struct{}
}

// StartFake starts command (FakeCommand, or a built pstestserver) playing
// sc, and returns once it serves.
func StartFake(ctx context.Context, command []string, sc Script) (*Fake, error) {
	sc = sc.Defaults()
	args := append(append([]string{}, command[1:]...), "--port=0", "--project="+project, "--min_ack_deadline=1s",
		"--demo_keys="+strconv.Itoa(sc.Keys), "--demo_retry_every="+strconv.Itoa(sc.RetryEvery),
		"--demo_lost_ack_every="+strconv.Itoa(sc.LostAckEvery), "--demo_seed="+strconv.FormatUint(sc.Seed, 10))
	f := &Fake{cmd: exec.Command(command[0], args...), ended: make(chan struct{})}
	f.cmd.Stderr = os.Stderr
	var err error
	if f.in, err = f.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := f.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := f.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the Pub/Sub fake (%s): %w", strings.Join(command, " "), err)
	}
	go func() { f.cmd.Wait(); close(f.ended) }()
	f.out = bufio.NewReader(stdout)
	line, err := f.answer(ctx, 10*time.Minute) // go run may build it first
	if err == nil {
		var ok bool
		if f.Addr, ok = strings.CutPrefix(line, "PUBSUB_EMULATOR_HOST="); !ok {
			err = fmt.Errorf("it said %q", line)
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("the Pub/Sub fake (%s) did not start: %w", strings.Join(command, " "), err)
	}
	return f, nil
}

// answer reads the fake's next line, within d.
func (f *Fake) answer(ctx context.Context, d time.Duration) (string, error) {
	line := make(chan string, 1)
	failed := make(chan error, 1)
	go func() {
		l, err := f.out.ReadString('\n')
		if err != nil {
			failed <- err
			return
		}
		line <- strings.TrimSpace(l)
	}()
	select {
	case l := <-line:
		return l, nil
	case err := <-failed:
		return "", fmt.Errorf("it ended (%w)", err)
	case <-time.After(d):
		return "", fmt.Errorf("no answer within %v", d)
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// command sends cmd and returns the fake's answer.
func (f *Fake) command(ctx context.Context, cmd string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := fmt.Fprintln(f.in, cmd); err != nil {
		return "", fmt.Errorf("the Pub/Sub fake: %w", err)
	}
	return f.answer(ctx, 30*time.Second)
}

// Name is the full name of a topic or subscription of the demo (Input,
// Subscription, ...) of kind ("topics", "subscriptions").
func Name(kind, short string) string { return "projects/" + project + "/" + kind + "/" + short }

// PublishLater publishes the script's publisher retries.
func (f *Fake) PublishLater(ctx context.Context) error {
	a, err := f.command(ctx, "later")
	if err == nil && a != "ok" {
		err = fmt.Errorf("the Pub/Sub fake said %q", a)
	}
	return err
}

// Report is what the fake saw so far.
func (f *Fake) Report(ctx context.Context) (Report, error) {
	a, err := f.command(ctx, "report")
	if err != nil {
		return Report{}, err
	}
	var r Report
	if err := json.Unmarshal([]byte(a), &r); err != nil {
		return Report{}, fmt.Errorf("the Pub/Sub fake's report %q: %w", a, err)
	}
	return r, nil
}

// Close ends the fake (it exits when its stdin closes) and waits for it.
func (f *Fake) Close() {
	f.in.Close()
	select {
	case <-f.ended:
	case <-time.After(10 * time.Second):
		f.cmd.Process.Kill()
		<-f.ended
	}
}

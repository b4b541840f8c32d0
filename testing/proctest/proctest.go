// Package proctest runs the servers tests start as processes (a Kafka
// broker, Prism's job server, a worker pool), each in a process group of
// its own with its output in a log file (Start): Await waits until it is
// ready, Kill kills its group as kill -9 would, Watch ties it to a test.
// AfterExit cleans up once this process has exited, however it exits;
// SkipOrFail is the rule for a test whose dependency the machine lacks.
package proctest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Proc is a process started by Start.
type Proc struct {
	// Log is the file its output (stdout and stderr) is appended to.
	Log string

	cmd    *exec.Cmd
	done   chan struct{} // closed when it exited
	start  int64         // the log's size when it started: Output is what this run wrote
	killed atomic.Bool   // Kill ended it
}

// Start starts cmd in a process group of its own, its stdout and stderr
// appended to log (its SysProcAttr is replaced). It is killed (SIGKILL)
// when the process that started it dies.
func Start(cmd *exec.Cmd, log string) (*Proc, error) {
	f, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p := &Proc{Log: log, cmd: cmd, done: make(chan struct{})}
	if st, err := f.Stat(); err == nil {
		p.start = st.Size()
	}
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	started := make(chan error, 1)
	go func() {
		// The process is killed when the thread that started it ends
		// (Pdeathsig), so that thread is this goroutine's, held until the
		// process exits: a test process that dies leaves no server behind.
		runtime.LockOSThread()
		err := cmd.Start()
		started <- err
		if err == nil {
			cmd.Wait()
		}
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("proctest: starting %s: %v", cmd.Path, err)
	}
	return p, nil
}

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Running reports whether the process has not exited yet.
func (p *Proc) Running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Output is what the process wrote to its log so far.
func (p *Proc) Output() string {
	b, _ := os.ReadFile(p.Log)
	if int64(len(b)) >= p.start {
		b = b[p.start:]
	}
	return string(b)
}

// Signal sends sig to the process's group.
func (p *Proc) Signal(sig syscall.Signal) { syscall.Kill(-p.cmd.Process.Pid, sig) }

// Kill kills the process with its group (SIGKILL, as kill -9) and waits
// until it has exited.
func (p *Proc) Kill() {
	p.killed.Store(true)
	p.Signal(syscall.SIGKILL)
	<-p.done
}

// Await polls ready every 100 ms until it holds; an error says the
// process exited first, or did not do what (within ctx), with the end of
// its output.
func (p *Proc) Await(ctx context.Context, what string, ready func() bool) error {
	for !ready() {
		select {
		case <-p.done:
			return fmt.Errorf("exited before it could %s:\n%s", what, Tail(p.Output(), 4000))
		case <-ctx.Done():
			return fmt.Errorf("did not %s (%v):\n%s", what, ctx.Err(), Tail(p.Output(), 4000))
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// AwaitLine waits until the process has written a line holding substr,
// and returns that line.
func (p *Proc) AwaitLine(ctx context.Context, substr string) (string, error) {
	var line string
	err := p.Await(ctx, fmt.Sprintf("print %q", substr), func() bool {
		for _, l := range strings.SplitAfter(p.Output(), "\n") {
			if strings.HasSuffix(l, "\n") && strings.Contains(l, substr) {
				line = strings.TrimSuffix(l, "\n")
				return true
			}
		}
		return false
	})
	return line, err
}

// AwaitPort waits until addr accepts TCP connections.
func (p *Proc) AwaitPort(ctx context.Context, addr string) error {
	return p.Await(ctx, "accept connections on "+addr, func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

// Watch ties the process to tb: when tb ends, its group is killed and, if
// tb failed, its output logged; if it exited before, other than by Kill,
// tb fails.
func (p *Proc) Watch(tb testing.TB, what string) {
	tb.Cleanup(func() {
		if !p.Running() && !p.killed.Load() {
			tb.Errorf("%s exited while the test ran: %v", what, p.cmd.ProcessState)
		}
		p.Kill()
		if tb.Failed() {
			tb.Logf("%s output:\n%s", what, p.Output())
		}
	})
}

// AfterExit starts script (sh) with this process's id as $1 and args
// after it, in a session of its own with no inherited output, so that go
// test does not wait for it: a watcher that cleans up once this process
// has exited, however it exits (go test's TestMain may end with os.Exit
// before any cleanup of ours runs).
func AfterExit(script string, args ...string) error {
	cmd := exec.Command("/bin/sh", append([]string{"-c", script, "proctest-watch", strconv.Itoa(os.Getpid())}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("proctest: starting a watcher: %v", err)
	}
	go cmd.Wait() // reap it if it ends while we run
	return nil
}

// SkipOrFail ends tb for what it could not start (err): a skip when err
// is absent (what the machine lacks: java, PostgreSQL) and the CI
// environment variable is unset, else a failure, since CI (.ci/run)
// installs what the tests need.
func SkipOrFail(tb testing.TB, err, absent error) {
	tb.Helper()
	if errors.Is(err, absent) && os.Getenv("CI") == "" {
		tb.Skipf("%v (skipped outside CI; in CI this fails)", err)
		return
	}
	tb.Fatal(err)
}

// Tail is the last n bytes of s, marked as cut when they are not all of it.
func Tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

package flinkserver

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"time"
)

// Process is a JVM started by StartJVM.
type Process struct {
	// Name names it in messages ("server", "taskmanager-1").
	Name string
	// Log is its log file (stdout and stderr).
	Log string
	// Startup are a TaskManager's listeners once it registered, before
	// any job: Flink's own (Cluster).
	Startup []netip.AddrPort

	cmd   *exec.Cmd
	done  chan struct{}
	start int64 // the log's size when it started: Output is what this run printed
}

// StartJVM starts java with args in dir, env added to its environment,
// its output appended to dir/<name>.log. It dies with the process that
// started it (and Kill kills its process group).
func StartJVM(dir, name string, args []string, env ...string) (*Process, error) {
	p := &Process{Name: name, Log: filepath.Join(dir, name+".log"), done: make(chan struct{})}
	logFile, err := os.OpenFile(p.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	if st, err := logFile.Stat(); err == nil {
		p.start = st.Size()
	}
	started := make(chan error, 1)
	go func() {
		// The JVM is killed when the thread that started it ends
		// (Pdeathsig), so that thread is this goroutine's, held until the
		// JVM exits: a process that dies leaves no JVM behind.
		runtime.LockOSThread()
		p.cmd = exec.Command("java", args...)
		p.cmd.Dir = dir
		p.cmd.Env = append(os.Environ(), env...)
		p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
		p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := p.cmd.Start(); err != nil {
			started <- err
			close(p.done)
			return
		}
		started <- nil
		p.cmd.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("flinkserver: starting java for %s: %v", name, err)
	}
	return p, nil
}

// Pid is the JVM's process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the JVM has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Output is what the JVM printed so far.
func (p *Process) Output() string {
	b, _ := os.ReadFile(p.Log)
	if int64(len(b)) >= p.start {
		b = b[p.start:]
	}
	return string(b)
}

// Kill kills the JVM with its process group (SIGKILL, as kill -9) and
// waits until it has exited.
func (p *Process) Kill() {
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// Await polls ok until it holds, at most timeout; an error says the JVM
// exited first or what did not happen (what) within timeout, with the end
// of its output.
func (p *Process) Await(ok func() bool, timeout time.Duration, what string) error {
	deadline := time.Now().Add(timeout)
	for !ok() {
		select {
		case <-p.done:
			return fmt.Errorf("exited before it could %s:\n%s", what, tail(p.Output(), 4000))
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("did not %s within %v:\n%s", what, timeout, tail(p.Output(), 4000))
		}
	}
	return nil
}

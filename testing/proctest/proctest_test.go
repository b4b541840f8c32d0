package proctest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func sh(t *testing.T, script string) *Proc {
	t.Helper()
	p, err := Start(exec.Command("/bin/sh", "-c", script), filepath.Join(t.TempDir(), "out.log"))
	require.NoError(t, err)
	return p
}

func TestAwaitLineReturnsTheLineAndKillEndsTheGroup(t *testing.T) {
	p := sh(t, "echo starting; sleep 60 & echo ADDR=here:1; wait")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	line, err := p.AwaitLine(ctx, "ADDR=")
	require.NoError(t, err)
	assert.Equal(t, "ADDR=here:1", line)
	assert.True(t, p.Running())
	p.Kill()
	assert.False(t, p.Running())
	assert.Eventually(t, func() bool { return syscall.Kill(-p.cmd.Process.Pid, 0) == syscall.ESRCH }, 5*time.Second, 50*time.Millisecond,
		"the background sleep, of the shell's group, is killed too")
}

func TestAwaitSaysTheProcessExitedFirst(t *testing.T) {
	p := sh(t, "echo bye; exit 3")
	_, err := p.AwaitLine(context.Background(), "never")
	require.ErrorContains(t, err, "exited before")
	assert.ErrorContains(t, err, "bye")
}

func TestAwaitPortAndAwaitsDeadline(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	p := sh(t, "sleep 60")
	defer p.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, p.AwaitPort(ctx, l.Addr().String()))
	short, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = p.AwaitLine(short, "never")
	assert.ErrorContains(t, err, "did not print")
}

// fakeTB records how a test ends.
type fakeTB struct {
	testing.TB
	skipped, failed bool
	cleanups        []func()
}

func (f *fakeTB) Helper()               {}
func (f *fakeTB) Skipf(string, ...any)  { f.skipped = true }
func (f *fakeTB) Fatal(...any)          { f.failed = true }
func (f *fakeTB) Errorf(string, ...any) { f.failed = true }
func (f *fakeTB) Failed() bool          { return f.failed }
func (f *fakeTB) Logf(string, ...any)   {}
func (f *fakeTB) Cleanup(c func())      { f.cleanups = append(f.cleanups, c) }

func TestWatchFailsTheTestOnlyForAnUnexpectedExit(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script string
		kill   bool
		fail   bool
	}{
		{"still running at the end", "sleep 60", false, false},
		{"killed by the test", "sleep 60", true, false},
		{"exited by itself", "exit 0", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, f := sh(t, tc.script), &fakeTB{}
			p.Watch(f, "it")
			if tc.kill {
				p.Kill()
			}
			if tc.fail {
				<-p.Done()
			}
			f.cleanups[0]()
			assert.Equal(t, tc.fail, f.failed)
			assert.False(t, p.Running())
		})
	}
}

func TestSkipOrFailSkipsWhatIsAbsentOutsideCIOnly(t *testing.T) {
	absent := errors.New("no java")
	for _, tc := range []struct {
		ci         string
		err        error
		skip, fail bool
	}{
		{"", fmt.Errorf("start: %w", absent), true, false},
		{"true", fmt.Errorf("start: %w", absent), false, true},
		{"", errors.New("disk full"), false, true},
	} {
		t.Run(strconv.Quote(tc.ci)+" "+tc.err.Error(), func(t *testing.T) {
			t.Setenv("CI", tc.ci)
			if tc.ci == "" {
				os.Unsetenv("CI")
			}
			f := &fakeTB{}
			SkipOrFail(f, tc.err, absent)
			assert.Equal(t, tc.skip, f.skipped, "skipped")
			assert.Equal(t, tc.fail, f.failed, "failed")
		})
	}
}

// Package jobservertest builds and starts what a submitted Beam job needs
// outside the submitting process, for tests of the submitted-job path: a
// standalone Beam job server — Prism's, from
// github.com/apache/beam/sdks/v2/go/cmd/prism — that pipelines are
// submitted to through the Job API with --runner=universal (the path a
// Flink or Spark job server serves), Beam Go's boot loader
// (github.com/apache/beam/sdks/v2/go/container), and a worker pool that
// starts SDK workers with it (EXTERNAL), as a worker-pool sidecar does
// for Flink on Kubernetes.
//
//	endpoint := jobservertest.Start(t)          // "localhost:PORT", stopped at cleanup
//	pool := jobservertest.StartWorkerPool(t)    // pool.Addr for --environment_config
//
// The binaries are built with the go command once and cached under the
// user cache directory, keyed by the Beam version and the Go toolchain
// (and, for the worker pool, which is this package's own command, by its
// source).
package jobservertest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// PrismPackage is the job server's main package.
const PrismPackage = "github.com/apache/beam/sdks/v2/go/cmd/prism"

// BuildTimeout bounds building the job server binary.
var BuildTimeout = 5 * time.Minute

// StartTimeout bounds the wait for the started server to accept connections.
var StartTimeout = 30 * time.Second

// BootPackage is Beam Go's boot loader, the SDK container's entry point.
const BootPackage = "github.com/apache/beam/sdks/v2/go/container"

// WorkerPoolPackage is this package's worker pool command.
const WorkerPoolPackage = "github.com/beamdedup/beamdedup/testing/jobservertest/cmd/workerpool"

// cachedBuild builds a main package once per test process, into the user
// cache directory under a name keyed by key, the Beam version and the Go
// toolchain; a binary already there is reused.
type cachedBuild struct {
	pkg, name string
	key       func() string
	once      sync.Once
	path      string
	err       error
}

func (b *cachedBuild) binary() (string, error) {
	b.once.Do(func() { b.path, b.err = build(b.pkg, b.name+"-"+b.key()) })
	return b.path, b.err
}

var (
	prismBuild = &cachedBuild{pkg: PrismPackage, name: "prism", key: versions}
	bootBuild  = &cachedBuild{pkg: BootPackage, name: "boot", key: versions}
	poolBuild  = &cachedBuild{pkg: WorkerPoolPackage, name: "workerpool", key: func() string { return versions() + "-" + sourceHash("cmd/workerpool/main.go") }}
)

// Binary returns the path of the built job server, building it on first use.
func Binary() (string, error) { return prismBuild.binary() }

// BootLoader returns the path of Beam Go's built boot loader, building it
// on first use.
func BootLoader() (string, error) { return bootBuild.binary() }

func versions() string {
	return fmt.Sprintf("%s-%s-%s-%s", beamVersion(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// sourceHash is a short hash of a file of this package's, by its path
// relative to the package.
func sourceHash(rel string) string {
	_, file, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(file), rel))
	if err != nil {
		return "unknown"
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:6])
}

func build(pkg, name string) (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	path := filepath.Join(dir, "beamdedup", "jobservertest", name)
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	goCmd := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goCmd); err != nil {
		goCmd = "go"
	}
	ctx, cancel := context.WithTimeout(context.Background(), BuildTimeout)
	defer cancel()
	// Build to a temporary name and rename, so a concurrent or interrupted
	// build never leaves a partial binary at path.
	tmp := fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
	cmd := exec.CommandContext(ctx, goCmd, "build", "-o", tmp, pkg)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("go build %s: %v\n%s", pkg, err, out.String())
	}
	return path, os.Rename(tmp, path)
}

// beamVersion is the Beam SDK version this test binary links, so that a
// cached binary matches it.
func beamVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == "github.com/apache/beam/sdks/v2" {
				if m.Replace != nil {
					return m.Replace.Version
				}
				return m.Version
			}
		}
	}
	return "unknown"
}

// FreePort returns a TCP port free on the loopback interface at the time
// of the call.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Start builds (once) and starts a standalone Prism job server on a free
// loopback port, waits until it accepts connections and returns its
// endpoint, "localhost:PORT". The server is killed when the test ends,
// with the SDK workers it started (PROCESS); its output, theirs included,
// goes to the test log on failure.
func Start(t testing.TB) string {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatalf("jobservertest: %v", err)
	}
	port, err := FreePort()
	if err != nil {
		t.Fatalf("jobservertest: %v", err)
	}
	cmd := groupCommand(t, bin, "--job_port="+strconv.Itoa(port), "--serve_http=false", "--log_level=warn")
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	done := startGroup(t, cmd, "job server", out)
	endpoint := net.JoinHostPort("localhost", strconv.Itoa(port))
	deadline := time.Now().Add(StartTimeout)
	for {
		c, err := net.DialTimeout("tcp", endpoint, time.Second)
		if err == nil {
			c.Close()
			return endpoint
		}
		select {
		case <-done:
			t.Fatalf("jobservertest: job server exited before accepting connections:\n%s", out.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("jobservertest: job server not accepting connections on %s after %v: %v", endpoint, StartTimeout, err)
		}
	}
}

// groupCommand is a command run in a process group of its own, in a
// temporary directory: the SDK workers a job server or a worker pool
// starts outlive it otherwise (and hold its output open), and the boot
// loaders write pipeline_options.json into their working directory.
func groupCommand(t testing.TB, bin string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	cmd.Dir = t.TempDir()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// startGroup starts cmd (a groupCommand) and returns the channel closed
// when it exited; when t ends, its process group is killed and, if t
// failed, its output is logged.
func startGroup(t testing.TB, cmd *exec.Cmd, what string, out *syncBuffer) <-chan struct{} {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatalf("jobservertest: starting %s: %v", cmd.Path, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		if t.Failed() {
			t.Logf("%s output:\n%s", what, out.String())
		}
	})
	return done
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// BootInADirOfItsOwn returns a PROCESS environment's command: Beam Go's
// boot loader, each run of it with a semi-persistent directory of its own
// under the test's temporary directory. By default the boot loader fetches
// the worker binary into /tmp/staged/<its name>, the same file for every
// boot loader on the machine: two TaskManagers starting a job's workers at
// once overwrite each other's copy, and one exits 1 ("Process died with
// exit code 1": the task fails and the job restarts; notes/beam-defects.md,
// 25).
func BootInADirOfItsOwn(t testing.TB) string {
	t.Helper()
	boot, err := BootLoader()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "boot")
	// The job's flags first: the last --semi_persist_dir counts.
	body := fmt.Sprintf("#!/bin/sh\nd=$(mktemp -d %q) || exit 1\nexec %q \"$@\" --semi_persist_dir=\"$d\"\n",
		filepath.Join(dir, "worker-XXXXXX"), boot)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return script
}

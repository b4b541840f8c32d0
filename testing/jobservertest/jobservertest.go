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
	"testing"
	"time"

	"github.com/beamdedup/beamdedup/testing/proctest"
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

// Binary returns the path of the built job server, building it on first use.
var Binary = sync.OnceValues(func() (string, error) { return build(PrismPackage, "prism-"+versions()) })

// BootLoader returns the path of Beam Go's built boot loader, building it
// on first use.
var BootLoader = sync.OnceValues(func() (string, error) { return build(BootPackage, "boot-"+versions()) })

// poolBinary is the built worker pool, keyed by its source too.
var poolBinary = sync.OnceValues(func() (string, error) {
	return build(WorkerPoolPackage, "workerpool-"+versions()+"-"+sourceHash("cmd/workerpool/main.go"))
})

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

// build builds a main package into the user cache directory under name
// (keyed by the Beam version and the Go toolchain: versions), or reuses
// the binary already there.
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
	p := start(t, "job server", exec.Command(bin, "--job_port="+strconv.Itoa(port), "--serve_http=false", "--log_level=warn"))
	endpoint := net.JoinHostPort("localhost", strconv.Itoa(port))
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	if err := p.AwaitPort(ctx, endpoint); err != nil {
		t.Fatalf("jobservertest: the job server: %v", err)
	}
	return endpoint
}

// start starts cmd in a temporary directory, in a process group of its
// own (proctest), killed when t ends, its output logged if t failed: the
// SDK workers a job server or a worker pool starts outlive it otherwise,
// and the boot loaders write pipeline_options.json into their working
// directory.
func start(t testing.TB, what string, cmd *exec.Cmd) *proctest.Proc {
	t.Helper()
	cmd.Dir = t.TempDir()
	p, err := proctest.Start(cmd, filepath.Join(cmd.Dir, "output.log"))
	if err != nil {
		t.Fatalf("jobservertest: %v", err)
	}
	p.Watch(t, what)
	return p
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

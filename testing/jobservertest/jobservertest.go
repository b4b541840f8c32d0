// Package jobservertest builds and starts a standalone Beam job server —
// Prism's, from github.com/apache/beam/sdks/v2/go/cmd/prism — for tests
// that submit pipelines through the Job API with --runner=universal, the
// same path a Flink or Spark job server serves.
//
//	endpoint := jobservertest.Start(t) // "localhost:PORT", stopped at cleanup
//
// The binary is built with the go command once and cached under the user
// cache directory, keyed by the Beam version and the Go toolchain.
package jobservertest

import (
	"bytes"
	"context"
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
)

// PrismPackage is the job server's main package.
const PrismPackage = "github.com/apache/beam/sdks/v2/go/cmd/prism"

// BuildTimeout bounds building the job server binary.
var BuildTimeout = 5 * time.Minute

// StartTimeout bounds the wait for the started server to accept connections.
var StartTimeout = 30 * time.Second

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// Binary returns the path of the built job server, building it on first use.
func Binary() (string, error) {
	buildOnce.Do(func() { binPath, buildErr = build() })
	return binPath, buildErr
}

func build() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	name := fmt.Sprintf("prism-%s-%s-%s-%s", beamVersion(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
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
	cmd := exec.CommandContext(ctx, goCmd, "build", "-o", tmp, PrismPackage)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("go build %s: %v\n%s", PrismPackage, err, out.String())
	}
	return path, os.Rename(tmp, path)
}

// beamVersion is the Beam SDK version this test binary links, so that a
// cached job server matches it.
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
// endpoint, "localhost:PORT". The server is killed when the test ends; its
// output goes to the test log on failure.
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
	cmd := exec.Command(bin, "--job_port="+strconv.Itoa(port), "--serve_http=false", "--log_level=warn")
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("jobservertest: starting %s: %v", bin, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("job server output:\n%s", out.String())
		}
	})
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

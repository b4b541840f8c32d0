package jobservertest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/beamdedup/beamdedup/testing/proctest"
)

// WorkerPool is a running worker pool (cmd/workerpool) that starts each
// SDK worker with Beam Go's boot loader.
type WorkerPool struct {
	// Addr is the pool's address, for --environment_config.
	Addr string
	proc *proctest.Proc
}

// StartWorkerPool builds (once) and starts a worker pool on a free port,
// with the boot loader (BootLoader) as each worker's command, and returns
// it once it listens. The pool, its boot loaders and their SDK workers
// run in a process group of their own, in a temporary directory, killed
// when the test ends. env adds to the pool's environment, which its
// workers inherit. A test that submits jobs to it calls RemoveBootCopies.
func StartWorkerPool(t testing.TB, env ...string) *WorkerPool {
	t.Helper()
	boot, err := BootLoader()
	if err != nil {
		t.Fatalf("jobservertest: %v", err)
	}
	bin, err := poolBinary()
	if err != nil {
		t.Fatalf("jobservertest: %v", err)
	}
	cmd := exec.Command(bin, "--boot="+boot, "--port=0")
	cmd.Env = append(os.Environ(), env...)
	p := &WorkerPool{proc: start(t, "worker pool", cmd)}
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	line, err := p.proc.AwaitLine(ctx, "WORKER_POOL=")
	if err != nil {
		t.Fatalf("jobservertest: the worker pool: %v", err)
	}
	p.Addr = strings.TrimPrefix(line, "WORKER_POOL=")
	return p
}

// Kill kills the pool with its boot loaders and SDK workers, as a lost
// machine would.
func (p *WorkerPool) Kill() { p.proc.Kill() }

// Freeze stops the pool with its boot loaders and SDK workers (SIGSTOP):
// their connections stay open and nothing more happens, as with a hung
// worker. Kill (or the test's end) ends them.
func (p *WorkerPool) Freeze() { p.proc.Signal(syscall.SIGSTOP) }

// Thaw lets a frozen pool and its workers go on (SIGCONT).
func (p *WorkerPool) Thaw() { p.proc.Signal(syscall.SIGCONT) }

// bootTmp is where the boot loader copies the worker binary it starts
// (os.MkdirTemp("/tmp/", "bin*") in container/boot.go, whatever TMPDIR
// says), and bootStaged where it materializes the staged artifacts (its
// default --semi_persist_dir, /tmp, plus "staged").
const (
	bootTmp    = "/tmp"
	bootStaged = "/tmp/staged"
)

// RemoveBootCopies removes, when the test ends, the copies of the worker
// binaries that boot loaders made of them meanwhile: the boot loader
// materializes the staged worker binary into /tmp/staged and copies it
// into a new /tmp/bin*/worker for every worker, and removes neither, so
// each submitted job of a test would leave hundreds of megabytes behind
// (notes/beam-defects.md, "The boot loader's copies and workers outlive
// their job"). Both directories are shared by every boot loader on the
// machine, so it removes only copies of the given binaries: directories
// created after the call holding nothing but a file called worker of a
// given binary's size, and staged files named after a given binary.
func RemoveBootCopies(t testing.TB, workerBinaries ...string) {
	if runtime.GOOS != "linux" {
		return
	}
	since := time.Now().Add(-time.Second)
	sizes := map[int64]bool{}
	var names []string
	for _, b := range workerBinaries {
		if fi, err := os.Stat(b); err == nil {
			sizes[fi.Size()] = true
			names = append(names, filepath.Base(b))
		}
	}
	t.Cleanup(func() {
		dirs, _ := filepath.Glob(filepath.Join(bootTmp, "bin*"))
		for _, d := range dirs {
			if fi, err := os.Stat(d); err != nil || !fi.IsDir() || fi.ModTime().Before(since) {
				continue
			}
			entries, err := os.ReadDir(d)
			if err != nil || len(entries) != 1 || entries[0].Name() != "worker" {
				continue
			}
			if fi, err := entries[0].Info(); err == nil && sizes[fi.Size()] {
				os.RemoveAll(d)
			}
		}
		staged, _ := os.ReadDir(bootStaged)
		for _, e := range staged {
			for _, n := range names {
				// The boot loader names a staged file "<n>-<binary name>".
				if strings.HasSuffix(e.Name(), "-"+n) {
					os.Remove(filepath.Join(bootStaged, e.Name()))
				}
			}
		}
	})
}

// ProcessWrapper returns the path of prism-process-boot.sh, the PROCESS
// command that works around Prism's quoted worker id: it strips the quotes
// and runs the boot loader named by BEAM_BOOT (docs/workers.md).
func ProcessWrapper() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "prism-process-boot.sh")
}

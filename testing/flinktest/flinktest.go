// Package flinktest starts Flink for the tests and for the commands in
// docs/runners.md and docs/flink-cluster.md: a Flink session cluster of
// its own processes with Beam's portable job server submitting to it
// (StartCluster, cluster.go; SharedCluster and MainCluster for a test
// package), or Beam's job server with its embedded Flink cluster
// (--flink-master=[local], Flink.Start). Pipelines are submitted through
// the Job API (--runner=flink --endpoint=…), and their SDK workers run in
// the submitting process (LOOPBACK), a worker pool (EXTERNAL) or processes
// of the TaskManagers (PROCESS).
//
//	func TestMain(m *testing.M) { flinktest.MainCluster(m) } // stops the shared cluster at the end
//	c := flinktest.SharedCluster(t)                         // c.Endpoint, c.REST
//
// The package's own tests (go test ./testing/flinktest/) run the
// transforms' semantics beside Prism, runjob's samples and what runs on
// Flink as it runs in production (checkpoints, savepoints, a TaskManager
// killed) on one such cluster.
//
// Maven Central publishes no job-server jar for any Beam version, but the
// runner module holds the driver (FlinkJobServerDriver): the Maven project
// in jobserver/ depends on it, and its classpath, resolved with mvn once
// per machine, is cached under the user cache directory, keyed by the
// project. The newest Beam release whose Flink runner and job-service
// modules are both served is 2.62.0 (Flink 1.19); the Go SDK of this
// module is 2.77.0, and docs/runners.md says what that mix does.
//
// The Flink job server's Job API and artifact service listen on loopback
// (GoOptionsJobServer); Spark's listen on every interface (Beam's job
// servers take no bind address: --job-host only names the host they
// report), so use that one on a machine whose network you trust.
// Without java or mvn a test is
// skipped, unless the CI environment variable is set: then it fails, since
// CI (.ci/run) installs what it needs.
package flinktest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/beamdedup/beamdedup/testing/jobservertest"
)

// BeamVersion is the Beam release of the job server (jobserver/pom.xml).
const BeamVersion = "2.62.0"

// FlinkVersion is the Flink release the runner module is built for.
const FlinkVersion = "1.19"

//go:embed jobserver/pom.xml
var flinkPom []byte

//go:embed jobserver/src
var flinkSources embed.FS

//go:embed sparkjobserver/pom.xml
var sparkPom []byte

// SparkVersion is the Spark release of the Spark job server.
const SparkVersion = "3.2.2"

// ErrNoJava reports that java or mvn is missing.
var ErrNoJava = errors.New("flinktest: java or mvn not found")

// ResolveTimeout bounds resolving a job server's classpath (a fresh
// machine downloads about 230 MB from Maven Central).
var ResolveTimeout = 30 * time.Minute

// StartTimeout bounds the wait for a started job server to accept jobs.
var StartTimeout = 2 * time.Minute

// Project is a Maven project whose dependencies' classpath is resolved
// with mvn once per machine and cached under the user cache directory,
// keyed by its pom; its Java sources, if any, are compiled against it with
// javac once per version of them.
type Project struct {
	// Name names it in messages and in its cache directory.
	Name string
	// Pom is its pom.xml.
	Pom []byte
	// Sources holds its Java sources (src/main/java/...), or nil.
	Sources fs.FS

	once sync.Once
	cp   string
	err  error
}

// Classpath returns the project's classpath: its compiled sources, if
// any, then its dependencies' jars. The first call on a machine resolves
// them (and again when a jar it listed is gone).
func (p *Project) Classpath() (string, error) {
	p.once.Do(func() {
		p.cp, p.err = p.dependencies()
		if p.err == nil && p.Sources != nil {
			var classes string
			classes, p.err = p.compile(p.cp)
			p.cp = classes + string(os.PathListSeparator) + p.cp
		}
	})
	return p.cp, p.err
}

func (p *Project) cacheDir() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	sum := sha256.Sum256(p.Pom)
	return filepath.Join(dir, "beamdedup", "maven", p.Name+"-"+hex.EncodeToString(sum[:6]))
}

func (p *Project) dependencies() (string, error) {
	if _, err := exec.LookPath("java"); err != nil {
		return "", fmt.Errorf("%w: %v", ErrNoJava, err)
	}
	dir := p.cacheDir()
	file := filepath.Join(dir, "classpath.txt")
	if b, err := os.ReadFile(file); err == nil && jarsExist(string(b)) {
		return string(b), nil
	}
	mvn, err := exec.LookPath("mvn")
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrNoJava, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "pom.xml"), p.Pom, 0o644); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), ResolveTimeout)
	defer cancel()
	// Resolve to a temporary name and rename, so that an interrupted or
	// concurrent run never leaves a partial list.
	tmp := fmt.Sprintf("%s.%d.tmp", file, os.Getpid())
	cmd := exec.CommandContext(ctx, mvn, "-B", "-q", "-f", filepath.Join(dir, "pom.xml"),
		"dependency:build-classpath", "-Dmdep.outputFile="+tmp)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("flinktest: resolving %s's classpath (mvn dependency:build-classpath in %s): %v\n%s", p.Name, dir, err, out.String())
	}
	b, err := os.ReadFile(tmp)
	if err != nil {
		return "", err
	}
	if !jarsExist(string(b)) {
		return "", fmt.Errorf("flinktest: mvn listed jars that are not there: %s", tmp)
	}
	return string(b), os.Rename(tmp, file)
}

// compile compiles the sources into the cache, in a directory named after
// their hash, and returns it.
func (p *Project) compile(cp string) (string, error) {
	h := sha256.New()
	var files []string
	err := fs.WalkDir(p.Sources, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".java") {
			return err
		}
		b, err := fs.ReadFile(p.Sources, path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", path, len(b))
		h.Write(b)
		files = append(files, path)
		return nil
	})
	if err != nil {
		return "", err
	}
	classes := filepath.Join(p.cacheDir(), "classes-"+hex.EncodeToString(h.Sum(nil)[:6]))
	if _, err := os.Stat(filepath.Join(classes, "ok")); err == nil {
		return classes, nil
	}
	src, err := os.MkdirTemp(p.cacheDir(), "src-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(src)
	args := []string{"-d", filepath.Join(src, "classes"), "-cp", cp, "--release", "17"}
	for _, f := range files {
		b, _ := fs.ReadFile(p.Sources, f)
		path := filepath.Join(src, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return "", err
		}
		args = append(args, path)
	}
	out, err := exec.Command("javac", args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("flinktest: javac for %s: %v\n%s", p.Name, err, out)
	}
	if err := os.WriteFile(filepath.Join(src, "classes", "ok"), nil, 0o644); err != nil {
		return "", err
	}
	os.RemoveAll(classes)
	return classes, os.Rename(filepath.Join(src, "classes"), classes)
}

func mustSub(f fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(f, dir)
	if err != nil {
		panic(err)
	}
	return sub
}

func jarsExist(cp string) bool {
	jars := strings.Split(strings.TrimSpace(cp), string(os.PathListSeparator))
	if len(jars) < 10 {
		return false
	}
	for _, jar := range jars {
		if _, err := os.Stat(jar); err != nil {
			return false
		}
	}
	return true
}

// JobServer is a Beam job server of a JVM runner, from a Maven project
// that depends on the module holding its driver.
type JobServer struct {
	*Project
	// Main is the driver's class.
	Main string
	// Args are the driver's arguments besides its ports.
	Args []string
	// JVM are the JVM's options.
	JVM []string
}

// Flink is Beam's Flink job server with an embedded Flink cluster. Its
// driver is Beam's with the Go job's Flink options lifted
// (jobserver/src, GoOptionsJobServer): a Go job's --checkpointing_interval,
// --savepoint_path, ... reach the runner (pipelines/jobrun/flinkopts).
var Flink = &JobServer{
	Project: &Project{Name: "flink-" + FlinkVersion + "-beam-" + BeamVersion, Pom: flinkPom, Sources: mustSub(flinkSources, "jobserver/src")},
	Main:    "org.apache.beam.runners.flink.GoOptionsJobServer",
	Args:    []string{"--flink-master=[local]"},
	// Flink's MiniCluster sizes its memory from the heap.
	JVM: []string{"-Xmx2g"},
}

// Against is the Flink job server submitting to the running cluster whose
// JobManager's REST API is at master (HOST:PORT). It stages its classpath
// with every job, as Beam's job server does: a cluster started from
// Flink's distribution has no Beam runner of its own.
func (j *JobServer) Against(master string) *JobServer {
	return &JobServer{Project: j.Project, Main: j.Main, Args: []string{"--flink-master=" + master}, JVM: []string{"-Xmx512m"}}
}

// Spark is Beam's Spark job server with a local Spark (two threads).
var Spark = &JobServer{
	Project: &Project{Name: "spark-" + SparkVersion + "-beam-" + BeamVersion, Pom: sparkPom},
	Main:    "org.apache.beam.runners.spark.SparkJobServerDriver",
	Args:    []string{"--spark-master-url=local[2]"},
	// Spark 3.2 reaches into the JDK's internals, which Java 17 closes.
	JVM: []string{"-Xmx2g",
		"--add-opens=java.base/java.lang=ALL-UNNAMED", "--add-opens=java.base/java.lang.invoke=ALL-UNNAMED",
		"--add-opens=java.base/java.nio=ALL-UNNAMED", "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
		"--add-opens=java.base/java.util=ALL-UNNAMED"},
}

// ready is the driver's line once its services listen; slf4j-simple
// logs it at info, everything else at warn (logLevels).
const ready = "Job server now running"

var logLevels = []string{
	"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
	"-Dorg.slf4j.simpleLogger.log.org.apache.beam.runners.jobsubmission=info",
	"-Dorg.slf4j.simpleLogger.log.org.apache.beam.runners.flink.GoOptionsJobServer=info",
}

// Server is a running job server.
type Server struct {
	// Endpoint is its Job API address, "localhost:PORT", for --endpoint.
	Endpoint string
	// Dir is its working directory (the boot loaders of PROCESS workers
	// write there).
	Dir string

	proc *Process
}

// Output is what the server printed so far (its log file, server.log in
// Dir).
func (s *Server) Output() string { return s.proc.Output() }

// LogFile is the path of the server's log file.
func (s *Server) LogFile() string { return s.proc.Log }

// Stop kills the server with its process group and removes its
// directory.
func (s *Server) Stop() {
	s.proc.Kill()
	os.RemoveAll(s.Dir)
}

// Start starts the job server on free loopback ports and returns it once
// it accepts jobs. The caller stops it (Stop); it also dies with the
// process that started it.
func (j *JobServer) Start() (*Server, error) {
	dir, err := os.MkdirTemp("", "flinktest-")
	if err != nil {
		return nil, err
	}
	s, err := j.start(dir, j.JVM, j.Args...)
	if err != nil {
		os.RemoveAll(dir)
	}
	return s, err
}

// start starts the job server in dir with the JVM options jvm and the
// driver arguments args; the caller removes dir.
func (j *JobServer) start(dir string, jvm []string, args ...string) (*Server, error) {
	cp, err := j.Classpath()
	if err != nil {
		return nil, err
	}
	var ports [3]int
	for i := range ports {
		if ports[i], err = jobservertest.FreePort(); err != nil {
			return nil, err
		}
	}
	cmd := append(append(append([]string{}, jvm...), logLevels...), "-cp", cp, j.Main,
		"--job-host=localhost",
		"--job-port="+strconv.Itoa(ports[0]),
		"--artifact-port="+strconv.Itoa(ports[1]),
		"--expansion-port="+strconv.Itoa(ports[2]))
	p, err := StartJVM(dir, "server", append(cmd, args...))
	if err != nil {
		return nil, err
	}
	s := &Server{Endpoint: net.JoinHostPort("localhost", strconv.Itoa(ports[0])), Dir: dir, proc: p}
	if err := p.AwaitOutput(ready, StartTimeout); err != nil {
		p.Kill()
		return nil, fmt.Errorf("flinktest: the %s job server %w", j.Name, err)
	}
	return s, nil
}

// Process is a JVM started by StartJVM.
type Process struct {
	// Name names it in messages ("server", "taskmanager-1").
	Name string
	// Log is its log file (stdout and stderr).
	Log string
	// Startup are a TaskManager's listeners once it registered, before
	// any job: Flink's own (Cluster).
	Startup []netip.AddrPort

	cmd  *exec.Cmd
	done chan struct{}
}

// StartJVM starts java with args in dir, its output in dir/<name>.log. It
// dies with the process that started it (and Kill kills its process
// group).
func StartJVM(dir, name string, args []string, env ...string) (*Process, error) {
	p := &Process{Name: name, Log: filepath.Join(dir, name+".log"), done: make(chan struct{})}
	logFile, err := os.Create(p.Log)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	started := make(chan error, 1)
	go func() {
		// The JVM is killed when the thread that started it ends
		// (Pdeathsig), so that thread is this goroutine's, held until the
		// JVM exits: a test binary that dies leaves no JVM behind.
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
		return nil, fmt.Errorf("flinktest: starting java for %s: %v", name, err)
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
	return string(b)
}

// Kill kills the JVM with its process group (SIGKILL, as kill -9) and
// waits until it has exited.
func (p *Process) Kill() {
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// AwaitOutput waits until the JVM has printed line, at most timeout; an
// error says it exited first or did not within timeout, with the end of
// its output.
func (p *Process) AwaitOutput(line string, timeout time.Duration) error {
	return p.Await(func() bool { return strings.Contains(p.Output(), line) }, timeout, fmt.Sprintf("print %q", line))
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

// SkipOrFail ends tb for a job server that could not start: a skip when
// java or mvn is missing outside CI, else a failure.
func SkipOrFail(tb testing.TB, err error) {
	tb.Helper()
	if errors.Is(err, ErrNoJava) && os.Getenv("CI") == "" {
		tb.Skipf("%v (tests on Flink are skipped outside CI without a JDK and Maven; in CI they fail)", err)
		return
	}
	tb.Fatal(err)
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

package flinkserver

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/beamdedup/beamdedup/internal/maven"
)

// JobServer is a Beam job server of a JVM runner, from a Maven project that
// depends on the module holding its driver (Flink's here; the tests start
// Spark's the same way).
type JobServer struct {
	*maven.Project
	// Main is the driver's class.
	Main string
	// Args are the driver's arguments besides its ports.
	Args []string
	// JVM are the JVM's options.
	JVM []string
}

// flinkMain is the Flink job server's driver (jobserver/src).
const flinkMain = "org.apache.beam.runners.flink.GoOptionsJobServer"

// ready is the driver's line once its services listen; slf4j-simple logs
// it at info, everything else at warn (LogLevels).
const ready = "Job server now running"

// LogLevels keep a job server to warnings, its jobs' submissions and the
// job server's own classes at info.
var LogLevels = []string{
	"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
	"-Dorg.slf4j.simpleLogger.log.org.apache.beam.runners.jobsubmission=info",
	"-Dorg.slf4j.simpleLogger.log.org.apache.beam.runners.flink.GoOptionsJobServer=info",
	"-Dorg.slf4j.simpleLogger.log.io.github.beamdedup=info",
	"-Dorg.slf4j.simpleLogger.showDateTime=true",
}

// Server is a running job server.
type Server struct {
	// Endpoint is its Job API address, "localhost:PORT", for --endpoint.
	Endpoint string
	// Dir is its directory: its log (server.log), its configuration
	// (conf/, embedded), the boot loaders of PROCESS workers write there.
	Dir string

	proc      *Process
	removeDir bool
}

// LogFile is the path of the server's log file.
func (s *Server) LogFile() string { return s.proc.Log }

// Name is the job server process's name in messages ("server").
func (s *Server) Name() string { return s.proc.Name }

// Stop kills the server with its process group, and removes its directory
// when it was a temporary one.
func (s *Server) Stop() {
	s.proc.Kill()
	if s.removeDir {
		os.RemoveAll(s.Dir)
	}
}

// Start starts the job server in a temporary directory on free loopback
// ports and returns it once it accepts jobs. The caller stops it (Stop,
// which removes the directory); it also dies with the process that started
// it.
func (j *JobServer) Start() (*Server, error) {
	dir, err := os.MkdirTemp("", "jobserver-")
	if err != nil {
		return nil, err
	}
	return j.StartIn(dir, true, j.JVM, j.Args...)
}

// StartIn starts the job server in dir, which Stop removes when temp, with
// the JVM options jvm and the driver arguments args; on an error, a temp
// dir is removed at once.
func (j *JobServer) StartIn(dir string, temp bool, jvm []string, args ...string) (s *Server, err error) {
	defer func() {
		if err != nil && temp {
			os.RemoveAll(dir)
		}
	}()
	cp, err := j.Classpath()
	if err != nil {
		return nil, err
	}
	var ports [3]int
	for i := range ports {
		if ports[i], err = freePort(); err != nil {
			return nil, err
		}
	}
	cmd := append(append(append([]string{}, jvm...), LogLevels...), "-cp", cp, j.Main,
		"--job-host=localhost",
		"--job-port="+strconv.Itoa(ports[0]),
		"--artifact-port="+strconv.Itoa(ports[1]),
		"--expansion-port="+strconv.Itoa(ports[2]),
		// Beam's default, /tmp/beam-artifact-staging, keeps every job's
		// artifacts (a Go job's worker binary, 100 MB or more) after the
		// job and the server: here they go with the server's directory.
		"--artifacts-dir="+filepath.Join(dir, "artifacts"))
	p, err := StartJVM(dir, "server", append(cmd, args...))
	if err != nil {
		return nil, err
	}
	s = &Server{Endpoint: net.JoinHostPort("localhost", strconv.Itoa(ports[0])), Dir: dir, proc: p, removeDir: temp}
	if err := p.Await(func() bool { return strings.Contains(p.Output(), ready) }, StartTimeout, fmt.Sprintf("print %q", ready)); err != nil {
		p.Kill()
		return nil, fmt.Errorf("flinkserver: the %s job server %w", j.Name, err)
	}
	return s, nil
}

// StartEmbedded starts the Flink job server with an embedded Flink cluster
// (Flink's MiniCluster, in the job server's JVM) and returns it once it
// accepts jobs: checkpoints and savepoints in cfg.Dir, cfg's defaults for
// Go jobs.
func StartEmbedded(cfg Config) (*Server, error) {
	// Flink's MiniCluster sizes its memory from the heap.
	return startFlink(cfg, "-Xmx2g", true, "--flink-master=[local]")
}

// StartAgainst starts the Flink job server submitting to the running Flink
// 1.19 cluster whose JobManager's REST API is at master (HOST:PORT), with
// cfg's defaults for Go jobs (cfg.Dir holds its log). It stages its
// classpath with every job, as Beam's job server does: a cluster started
// from Flink's distribution has no Beam runner of its own; the job server's
// classes come first in it (docs/flink-jobserver.md).
func StartAgainst(master string, cfg Config) (*Server, error) {
	return startFlink(cfg, "-Xmx512m", false, "--flink-master="+master)
}

// startFlink starts the Flink job server in cfg.Dir with the heap heap,
// and with cfg's Flink configuration when conf.
func startFlink(cfg Config, heap string, conf bool, args ...string) (*Server, error) {
	cfg = cfg.withDefaults()
	dir, temp, err := prepareDir(cfg.Dir)
	if err != nil {
		return nil, err
	}
	if conf {
		if err := writeConf(filepath.Join(dir, "conf", "flink-conf.yaml"), cfg.flinkConf(dir)); err != nil {
			return nil, err
		}
		args = append(args, "--flink-conf-dir="+filepath.Join(dir, "conf"))
	}
	j := &JobServer{Project: Project, Main: flinkMain}
	return j.StartIn(dir, temp, append([]string{heap}, cfg.jobServerJVM()...), args...)
}

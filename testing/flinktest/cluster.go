package flinktest

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/beamdedup/beamdedup/testing/jobservertest"
)

// ClusterConfig sizes a Cluster. The zero value is the tests' cluster: two
// TaskManagers of two slots.
type ClusterConfig struct {
	// TaskManagers is how many TaskManagers start (default 2).
	TaskManagers int
	// Slots is each TaskManager's task slots (default 2).
	Slots int
	// Conf adds to (or overrides) the Flink configuration, key: value.
	Conf map[string]string
}

// Cluster is a Flink session cluster of its own processes, on this
// machine: a JobManager (StandaloneSessionClusterEntrypoint) and
// TaskManagers (TaskManagerRunner), from the Flink jars of the job
// server's Maven project (Flink 1.19.0, the version Beam's runner module
// is built against; Maven Central serves no flink-dist), every port bound
// to 127.0.0.1; and Beam's job server submitting to it
// (--flink-master=localhost:REST), staging no jar, since the cluster's
// classpath holds the runner.
type Cluster struct {
	// REST is the JobManager's REST address, "localhost:PORT": Flink's
	// web API and what the job server submits to.
	REST string
	// Endpoint is the job server's Job API address, for --endpoint.
	Endpoint string
	// Dir holds the configuration (conf/), the logs, and the directories
	// of checkpoints and savepoints.
	Dir string
	// Checkpoints and Savepoints are the cluster's default directories
	// (state.checkpoints.dir, state.savepoints.dir), as file:// URIs.
	Checkpoints, Savepoints string

	JobManager *Process
	JobServer  *Server

	mu           sync.Mutex
	taskManagers []*Process
	started      int
	cp           string
	slots        int
}

// JVM sizes: modest heaps, the machine is shared (2 cores).
var (
	jobManagerJVM = []string{"-Xmx256m", "-XX:MaxMetaspaceSize=160m"}
	// A TaskManager's heap is its framework and task heap, its direct
	// memory the framework's off-heap and the network buffers, as the
	// taskmanager.memory.* keys below say (Flink's start scripts compute
	// the same from them).
	// The direct memory is also where Beam's gRPC servers buffer what they
	// send: the worker binary a PROCESS worker's boot loader fetches
	// (a test binary is some 100 MB) passes through it whole.
	taskManagerJVM = []string{"-Xmx576m", "-XX:MaxDirectMemorySize=352m", "-XX:MaxMetaspaceSize=192m"}
	// The job server translates and submits; it stages no jar, since the
	// cluster's classpath holds the runner (GoOptionsJobServer).
	clusterJobServerJVM = []string{"-Xmx384m", "-Dbeamdedup.stage=none"}
)

// clusterConf is the cluster's Flink configuration less its ports and
// directories.
var clusterConf = map[string]string{
	"jobmanager.memory.heap.size":                "256m",
	"jobmanager.memory.off-heap.size":            "64m",
	"jobmanager.memory.jvm-metaspace.size":       "160m",
	"jobmanager.memory.jvm-overhead.min":         "64m",
	"jobmanager.memory.jvm-overhead.max":         "64m",
	"taskmanager.memory.framework.heap.size":     "64m",
	"taskmanager.memory.task.heap.size":          "512m",
	"taskmanager.memory.managed.size":            "64m",
	"taskmanager.memory.framework.off-heap.size": "64m",
	"taskmanager.memory.task.off-heap.size":      "256m",
	"taskmanager.memory.network.min":             "32m",
	"taskmanager.memory.network.max":             "32m",
	"taskmanager.memory.jvm-metaspace.size":      "192m",
	"taskmanager.memory.jvm-overhead.min":        "96m",
	"taskmanager.memory.jvm-overhead.max":        "96m",
	// The runner is on every process's classpath and no jar is staged: a
	// job's classes come from there, never from a second copy.
	"classloader.resolve-order": "parent-first",
	// A job's subtasks on different TaskManagers, so that losing one
	// TaskManager fails a part of every job.
	"cluster.evenly-spread-out-slots": "true",
	// A killed TaskManager is declared lost at its first failed heartbeat
	// RPC (its port refuses), not after heartbeat.timeout; the timeout
	// stays long enough for a TaskManager on a loaded machine.
	"heartbeat.interval":              "1000",
	"heartbeat.timeout":               "30000",
	"heartbeat.rpc-failure-threshold": "1",
	"restart-strategy.type":           "fixed-delay",
	// A job restarts a few times, not twenty: each failed attempt of a
	// job whose workers are gone leaves Beam's environment objects behind
	// in the TaskManager's heap.
	"restart-strategy.fixed-delay.attempts": "4",
	"restart-strategy.fixed-delay.delay":    "1 s",
	"web.submit.enable":                     "false",
	// The REST API's metrics are at most this old. Flink's default, 10 s,
	// is the floor of a watchdog's stall limit on Flink; the tests' limits
	// are a few seconds.
	"metrics.fetcher.update-interval": "1000",
	"state.backend.type":              "hashmap",
	// A job's key groups unless it sets --max_parallelism (the job server
	// reads this file too: --flink-conf-dir). Beam's runner (2.62.0)
	// registers a new keyed state for every self-checkpoint of a
	// splittable source (periodic.Impulse, pubsubio, kafkaio), never
	// unregistered while the task runs, and the heap backend gives each a
	// table per key group of the subtask: about 70 KB at Flink's default
	// 128 groups, so a TaskManager of a stream with a 100 ms tick died of
	// its heap within minutes (notes/beam-defects.md, 22). 8 groups serve
	// the tests' parallelism (up to 4) for a tenth of that.
	"pipeline.max-parallelism": "8",
}

// StartCluster starts a cluster and its job server and returns once every
// TaskManager has registered and the job server accepts jobs. Stop stops
// it; its processes also die with the process that started them.
func StartCluster(cfg ClusterConfig) (c *Cluster, err error) {
	if cfg.TaskManagers <= 0 {
		cfg.TaskManagers = 2
	}
	if cfg.Slots <= 0 {
		cfg.Slots = 2
	}
	cp, err := Flink.Classpath()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "flinkcluster-")
	if err != nil {
		return nil, err
	}
	c = &Cluster{Dir: dir, cp: cp, slots: cfg.Slots,
		Checkpoints: "file://" + filepath.Join(dir, "checkpoints"), Savepoints: "file://" + filepath.Join(dir, "savepoints")}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	var ports [3]int
	for i := range ports {
		if ports[i], err = jobservertest.FreePort(); err != nil {
			return nil, err
		}
	}
	conf := map[string]string{
		"jobmanager.rpc.address":        "localhost",
		"jobmanager.bind-host":          "127.0.0.1",
		"jobmanager.rpc.port":           strconv.Itoa(ports[0]),
		"rest.address":                  "localhost",
		"rest.bind-address":             "127.0.0.1",
		"rest.port":                     strconv.Itoa(ports[1]),
		"blob.server.port":              strconv.Itoa(ports[2]),
		"taskmanager.host":              "localhost",
		"taskmanager.bind-host":         "127.0.0.1",
		"taskmanager.numberOfTaskSlots": strconv.Itoa(cfg.Slots),
		"taskmanager.cpu.cores":         strconv.Itoa(cfg.Slots),
		"state.checkpoints.dir":         c.Checkpoints,
		"state.savepoints.dir":          c.Savepoints,
		"io.tmp.dirs":                   filepath.Join(dir, "tmp"),
	}
	for k, v := range clusterConf {
		conf[k] = v
	}
	for k, v := range cfg.Conf {
		conf[k] = v
	}
	for _, d := range []string{"conf", "tmp", "checkpoints", "savepoints"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	if err := writeConf(filepath.Join(dir, "conf", "flink-conf.yaml"), conf); err != nil {
		return nil, err
	}
	c.REST = net.JoinHostPort("localhost", strconv.Itoa(ports[1]))
	args := append(append(append([]string{}, jobManagerJVM...), logLevelsCluster...), "-cp", cp,
		"org.apache.flink.runtime.entrypoint.StandaloneSessionClusterEntrypoint", "--configDir", filepath.Join(dir, "conf"))
	if c.JobManager, err = StartJVM(dir, "jobmanager", args); err != nil {
		return nil, err
	}
	for range cfg.TaskManagers {
		if _, err := c.startTaskManager(); err != nil {
			return nil, err
		}
	}
	if err := c.awaitStarted(cfg.TaskManagers); err != nil {
		return nil, err
	}
	c.JobServer, err = Flink.start(dir, clusterJobServerJVM, "--flink-master="+c.REST, "--flink-conf-dir="+filepath.Join(dir, "conf"))
	if err != nil {
		return nil, err
	}
	c.Endpoint = c.JobServer.Endpoint
	return c, nil
}

// logLevelsCluster keeps Flink's processes to warnings and its lifecycle
// (the JobManager's job and checkpoint coordination at info).
var logLevelsCluster = []string{
	"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
	"-Dorg.slf4j.simpleLogger.log.org.apache.flink.runtime.checkpoint.CheckpointCoordinator=info",
	"-Dorg.slf4j.simpleLogger.log.org.apache.flink.runtime.executiongraph.ExecutionGraph=info",
	"-Dorg.slf4j.simpleLogger.showDateTime=true",
}

func writeConf(path string, conf map[string]string) error {
	keys := make([]string, 0, len(conf))
	for k := range conf {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("# Written by testing/flinktest (StartCluster).\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "%s: %s\n", k, conf[k])
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// StartTaskManager starts one more TaskManager and returns it once it has
// registered with the JobManager.
func (c *Cluster) StartTaskManager() (*Process, error) {
	want := len(c.TaskManagers()) + 1
	p, err := c.startTaskManager()
	if err != nil {
		return nil, err
	}
	return p, c.awaitStarted(want)
}

// awaitStarted waits until n TaskManagers are registered and each live
// one is among them by its own RPC port (a killed one stays registered
// until its heartbeat times out, so the count alone can be met before a
// new one registers), then records the new ones' listeners: Flink's own,
// before any job.
func (c *Cluster) awaitStarted(n int) error {
	if err := c.AwaitTaskManagers(n, StartTimeout); err != nil {
		return err
	}
	for _, p := range c.TaskManagers() {
		if p.Startup != nil {
			continue
		}
		var ls []netip.AddrPort
		var last string
		err := p.Await(func() bool {
			var err error
			if ls, err = Listeners(p.Pid()); err != nil {
				last = err.Error()
				return false
			}
			var o struct {
				TaskManagers []struct {
					Path string `json:"path"`
				} `json:"taskmanagers"`
			}
			if err := c.getJSON("/taskmanagers", &o); err != nil {
				last = err.Error()
				return false
			}
			for _, tm := range o.TaskManagers {
				for _, l := range ls {
					if strings.Contains(tm.Path, fmt.Sprintf(":%d/", l.Port())) {
						return true
					}
				}
			}
			last = fmt.Sprintf("listening on %v; registered: %v", ls, o.TaskManagers)
			return false
		}, StartTimeout, "register with the JobManager")
		if err != nil {
			return fmt.Errorf("flinktest: %w (last: %s)", err, last)
		}
		p.Startup = ls
	}
	return nil
}

func (c *Cluster) startTaskManager() (*Process, error) {
	c.mu.Lock()
	c.started++
	name := fmt.Sprintf("taskmanager-%d", c.started)
	c.mu.Unlock()
	args := append(append(append([]string{}, taskManagerJVM...), logLevelsCluster[:1]...), "-cp", c.cp,
		"org.apache.flink.runtime.taskexecutor.TaskManagerRunner", "--configDir", filepath.Join(c.Dir, "conf"),
		"-Dtaskmanager.resource-id="+name)
	p, err := StartJVM(c.Dir, name, args)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.taskManagers = append(c.taskManagers, p)
	c.mu.Unlock()
	return p, nil
}

// TaskManagers are the TaskManagers started and not killed.
func (c *Cluster) TaskManagers() []*Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	var live []*Process
	for _, p := range c.taskManagers {
		select {
		case <-p.Done():
		default:
			live = append(live, p)
		}
	}
	return live
}

// AwaitTaskManagers waits until n TaskManagers are registered with the
// JobManager (Flink's REST API, /overview), at most timeout.
func (c *Cluster) AwaitTaskManagers(n int, timeout time.Duration) error {
	var last string
	err := c.JobManager.Await(func() bool {
		var o struct {
			TaskManagers int `json:"taskmanagers"`
		}
		if err := c.getJSON("/overview", &o); err != nil {
			last = err.Error()
			return false
		}
		last = fmt.Sprintf("%d registered", o.TaskManagers)
		return o.TaskManagers == n
	}, timeout, fmt.Sprintf("see %d TaskManagers registered", n))
	if err != nil {
		return fmt.Errorf("flinktest: the cluster's JobManager %w (last: %s)", err, last)
	}
	return nil
}

func (c *Cluster) getJSON(path string, v any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.REST+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// Logs is the end of every process's log, for a failed test.
func (c *Cluster) Logs(n int) string {
	var b strings.Builder
	procs := []*Process{}
	if c.JobManager != nil {
		procs = append(procs, c.JobManager)
	}
	c.mu.Lock()
	procs = append(procs, c.taskManagers...)
	c.mu.Unlock()
	if c.JobServer != nil {
		procs = append(procs, c.JobServer.proc)
	}
	for _, p := range procs {
		fmt.Fprintf(&b, "==> %s (%s), last %d bytes:\n%s\n", p.Name, p.Log, n, tail(p.Output(), n))
	}
	return b.String()
}

// Stop kills every process of the cluster and removes its directory.
func (c *Cluster) Stop() {
	if c.JobServer != nil {
		c.JobServer.proc.Kill()
	}
	c.mu.Lock()
	tms := c.taskManagers
	c.mu.Unlock()
	for _, p := range tms {
		p.Kill()
	}
	if c.JobManager != nil {
		c.JobManager.Kill()
	}
	os.RemoveAll(c.Dir)
}

var sharedCluster struct {
	sync.Mutex
	c   *Cluster
	err error
}

// SharedCluster returns the cluster of this test binary, starting it on
// first use; MainCluster stops it when the tests end. A test that cannot
// have it is skipped or failed (SkipOrFail).
func SharedCluster(tb testing.TB) *Cluster {
	tb.Helper()
	sharedCluster.Lock()
	defer sharedCluster.Unlock()
	if sharedCluster.c == nil && sharedCluster.err == nil {
		sharedCluster.c, sharedCluster.err = StartCluster(ClusterConfig{})
	}
	if sharedCluster.err != nil {
		SkipOrFail(tb, sharedCluster.err)
		return nil
	}
	return sharedCluster.c
}

// MainCluster is the TestMain of a package whose tests use SharedCluster:
// it runs the tests and stops the cluster, printing the end of its logs
// when a test failed.
func MainCluster(m *testing.M) {
	code := m.Run()
	sharedCluster.Lock()
	if c := sharedCluster.c; c != nil {
		if code != 0 {
			fmt.Fprintf(os.Stderr, "flink cluster logs:\n%s\n", c.Logs(6000))
		}
		c.Stop()
	}
	sharedCluster.Unlock()
	os.Exit(code)
}

// Listeners lists the listening TCP sockets of the process pid (Linux:
// its descriptors' socket inodes, looked up in /proc/<pid>/net/tcp and
// tcp6).
func Listeners(pid int) ([]netip.AddrPort, error) {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return nil, err
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil && strings.HasPrefix(link, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] = true
		}
	}
	var out []netip.AddrPort
	for _, table := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			return nil, err
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "0A" || !inodes[f[9]] { // 0A: LISTEN
				continue
			}
			ap, err := procAddr(f[1])
			if err != nil {
				return nil, err
			}
			out = append(out, ap)
		}
	}
	return out, nil
}

// procAddr parses /proc/net/tcp's "HEXADDR:HEXPORT", the address in 32-bit
// words of host byte order (little-endian here).
func procAddr(s string) (netip.AddrPort, error) {
	host, port, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("bad address %q", s)
	}
	raw, err := hex.DecodeString(host)
	if err != nil {
		return netip.AddrPort{}, err
	}
	for i := 0; i+4 <= len(raw); i += 4 {
		raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
	}
	p, err := strconv.ParseUint(port, 16, 16)
	if err != nil {
		return netip.AddrPort{}, err
	}
	addr, ok := netip.AddrFromSlice(raw)
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("bad address %q", s)
	}
	return netip.AddrPortFrom(addr.Unmap(), uint16(p)), nil
}

// Processes are the cluster's processes: the JobManager, the live
// TaskManagers and the job server.
func (c *Cluster) Processes() []*Process {
	return append(append([]*Process{c.JobManager}, c.TaskManagers()...), c.JobServer.proc)
}

// Name is the job server process's name in messages and Processes.
func (s *Server) Name() string { return s.proc.Name }

// Replenish starts a TaskManager for each one that died since the cluster
// started (killed by a test, or dead of its own) and waits until n are
// registered; it returns the dead ones' names and the end of their logs.
func (c *Cluster) Replenish(n int) (string, error) {
	live := c.TaskManagers()
	if len(live) >= n {
		return "", nil
	}
	var died strings.Builder
	c.mu.Lock()
	for _, p := range c.taskManagers {
		select {
		case <-p.Done():
			fmt.Fprintf(&died, "%s died; its log ends:\n%s\n", p.Name, tail(p.Output(), 1500))
		default:
		}
	}
	c.mu.Unlock()
	for range n - len(live) {
		if _, err := c.startTaskManager(); err != nil {
			return died.String(), err
		}
	}
	return died.String(), c.awaitStarted(n)
}

package flinkserver

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/beamdedup/beamdedup/internal/flinkrest"
)

// Cluster is a Flink session cluster of its own processes on this
// machine, a JobManager and TaskManagers run from the job server's Maven
// project's Flink jars (Maven Central serves no flink-dist), every port on
// 127.0.0.1; and the job server submitting to it, staging no jar, since the
// cluster's classpath holds the runner and the job server's classes.
type Cluster struct {
	// REST is the JobManager's REST address, "localhost:PORT": Flink's
	// web API and what the job server submits to.
	REST string
	// Endpoint is the job server's Job API address, for --endpoint.
	Endpoint string
	// Dir holds the configuration (conf/), the logs, and the directories
	// of checkpoints and savepoints (Config.Dir, or a temporary one).
	Dir string
	// Checkpoints and Savepoints are the cluster's default directories
	// (state.checkpoints.dir, state.savepoints.dir), as file:// URIs.
	Checkpoints, Savepoints string

	JobManager *Process
	JobServer  *Server

	removeDir    bool
	mu           sync.Mutex
	taskManagers []*Process
	started      int
	cp           string
}

// JVM sizes: modest heaps, the machine is shared.
var (
	jobManagerJVM       = []string{"-Xmx256m", "-XX:MaxMetaspaceSize=160m"}
	clusterJobServerJVM = []string{"-Xmx384m", "-Dbeamdedup.stage=none"}
)

// taskManagerJVM: the heap is the framework and task heap, the direct
// memory the framework's and task's off-heap and the network buffers, as
// clusterConf's taskmanager.memory.* keys say (Flink's start scripts
// compute the same). Beam's gRPC servers buffer there too: a PROCESS
// worker's binary (some 100 MB) passes through it whole.
var taskManagerJVM = []string{"-Xmx576m", "-XX:MaxDirectMemorySize=352m", "-XX:MaxMetaspaceSize=192m"}

// clusterConf is a session cluster's Flink configuration less its ports,
// directories and Config's settings.
func clusterConf(cfg Config) map[string]string {
	return map[string]string{
		"jobmanager.memory.heap.size":                "256m",
		"jobmanager.memory.off-heap.size":            "64m",
		"jobmanager.memory.jvm-metaspace.size":       "160m",
		"jobmanager.memory.jvm-overhead.min":         "64m",
		"jobmanager.memory.jvm-overhead.max":         "64m",
		"taskmanager.memory.framework.heap.size":     "64m",
		"taskmanager.memory.task.heap.size":          "512m",
		"taskmanager.memory.managed.size":            fmt.Sprintf("%dm", cfg.ManagedMemoryMB),
		"taskmanager.memory.framework.off-heap.size": "64m",
		"taskmanager.memory.task.off-heap.size":      "256m",
		"taskmanager.memory.network.min":             "32m",
		"taskmanager.memory.network.max":             "32m",
		"taskmanager.memory.jvm-metaspace.size":      "192m",
		"taskmanager.memory.jvm-overhead.min":        "96m",
		"taskmanager.memory.jvm-overhead.max":        "96m",
		// The runner is on every process's classpath and no jar is staged:
		// a job's classes come from there, never from a second copy.
		"classloader.resolve-order": "parent-first",
		// A job's subtasks on different TaskManagers, so that losing one
		// TaskManager fails a part of every job.
		"cluster.evenly-spread-out-slots": "true",
	}
}

// StartCluster starts a session cluster and its job server and returns
// once every TaskManager has registered and the job server accepts jobs.
// Its processes die with Stop, or with the process that started them.
func StartCluster(cfg Config) (c *Cluster, err error) {
	cfg = cfg.withDefaults()
	cp, err := Project.Classpath()
	if err != nil {
		return nil, err
	}
	dir, temp, err := prepareDir(cfg.Dir)
	if err != nil {
		return nil, err
	}
	c = &Cluster{Dir: dir, cp: cp, removeDir: temp,
		Checkpoints: "file://" + filepath.Join(dir, "checkpoints"), Savepoints: "file://" + filepath.Join(dir, "savepoints")}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	var ports [3]int
	for i := range ports {
		if ports[i], err = freePort(); err != nil {
			return nil, err
		}
	}
	conf := cfg.flinkConf(dir)
	for k, v := range clusterConf(cfg) {
		if _, set := cfg.Conf[k]; !set {
			conf[k] = v
		}
	}
	for k, v := range map[string]string{
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
		"io.tmp.dirs":                   filepath.Join(dir, "tmp"),
	} {
		conf[k] = v
	}
	if err := writeConf(filepath.Join(dir, "conf", "flink-conf.yaml"), conf); err != nil {
		return nil, err
	}
	c.REST = net.JoinHostPort("localhost", strconv.Itoa(ports[1]))
	args := append(append(append([]string{}, jobManagerJVM...), jobManagerLogLevels...), "-cp", cp,
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
	j := &JobServer{Project: Project, Main: flinkMain}
	c.JobServer, err = j.StartIn(dir, false, append(append([]string{}, clusterJobServerJVM...), cfg.jobServerJVM()...),
		"--flink-master="+c.REST, "--flink-conf-dir="+filepath.Join(dir, "conf"))
	if err != nil {
		return nil, err
	}
	c.Endpoint = c.JobServer.Endpoint
	return c, nil
}

// taskManagerLogLevels keep a TaskManager to warnings, the job server's
// classes (its operators, the impulse) at info.
var taskManagerLogLevels = []string{
	"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
	"-Dorg.slf4j.simpleLogger.log.io.github.beamdedup=info",
	"-Dorg.slf4j.simpleLogger.log.org.apache.beam.runners.flink.translation.functions.ImpulseSourceFunction=info",
	"-Dorg.slf4j.simpleLogger.showDateTime=true",
}

// jobManagerLogLevels add the job's lifecycle (job and checkpoint
// coordination) and the TaskManagers' (registered, lost) at info.
var jobManagerLogLevels = append([]string{
	"-Dorg.slf4j.simpleLogger.log.org.apache.flink.runtime.jobmaster.JobMaster=info",
	"-Dorg.slf4j.simpleLogger.log.org.apache.flink.runtime.resourcemanager.StandaloneResourceManager=info",
	"-Dorg.slf4j.simpleLogger.log.org.apache.flink.runtime.checkpoint.CheckpointCoordinator=info",
	"-Dorg.slf4j.simpleLogger.log.org.apache.flink.runtime.executiongraph.ExecutionGraph=info",
}, taskManagerLogLevels...)

// awaitStarted waits until n TaskManagers are registered with the
// JobManager and each live one is among them by its own RPC port (a killed
// one stays registered until its heartbeat times out), then records the
// new ones' listeners before any job (Process.Startup).
func (c *Cluster) awaitStarted(n int) error {
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
	}, StartTimeout, fmt.Sprintf("see %d TaskManagers registered", n))
	if err != nil {
		return fmt.Errorf("flinkserver: the cluster's JobManager %w (last: %s)", err, last)
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
			return fmt.Errorf("flinkserver: %w (last: %s)", err, last)
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
	args := append(append(append([]string{}, taskManagerJVM...), taskManagerLogLevels...), "-cp", c.cp,
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

func (c *Cluster) getJSON(path string, v any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return flinkrest.New(c.REST).Get(ctx, path, v)
}

// Logs is the end of every process's log, for a failed test.
func (c *Cluster) Logs(n int) string {
	var b strings.Builder
	for _, p := range c.procs() {
		fmt.Fprintf(&b, "==> %s (%s), last %d bytes:\n%s\n", p.Name, p.Log, n, tail(p.Output(), n))
	}
	return b.String()
}

// Stop kills every process of the cluster, the last started first, and
// removes its directory when it was a temporary one (Config.Dir empty).
func (c *Cluster) Stop() {
	procs := c.procs()
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].Kill()
	}
	if c.removeDir {
		os.RemoveAll(c.Dir)
	}
}

// procs are the processes started so far, dead ones included: the
// JobManager, the TaskManagers, the job server.
func (c *Cluster) procs() []*Process {
	c.mu.Lock()
	procs := append([]*Process{c.JobManager}, c.taskManagers...)
	c.mu.Unlock()
	if c.JobServer != nil {
		procs = append(procs, c.JobServer.proc)
	}
	return slices.DeleteFunc(procs, func(p *Process) bool { return p == nil })
}

// Processes are the cluster's processes: the JobManager, the live
// TaskManagers and the job server.
func (c *Cluster) Processes() []*Process {
	return append(append([]*Process{c.JobManager}, c.TaskManagers()...), c.JobServer.proc)
}

// Replenish starts a TaskManager for each one that died since the cluster
// started (killed by a test, or dead of its own) and waits until n are
// registered; it returns the dead ones' names and the end of their logs.
// A TaskManager that registered once and is no longer registered with the
// ResourceManager (its heartbeat there timed out on a loaded machine, and
// it did not come back) is killed and replaced too: its slots are lost to
// every job until then.
func (c *Cluster) Replenish(n int) (string, error) {
	var died strings.Builder
	var o struct {
		TaskManagers []struct {
			ID string `json:"id"`
		} `json:"taskmanagers"`
	}
	if err := c.getJSON("/taskmanagers", &o); err == nil {
		registered := map[string]bool{}
		for _, tm := range o.TaskManagers {
			registered[tm.ID] = true
		}
		for _, p := range c.TaskManagers() {
			if p.Startup != nil && !registered[p.Name] {
				fmt.Fprintf(&died, "%s was alive but no longer registered with the ResourceManager: killed\n", p.Name)
				p.Kill()
			}
		}
	}
	live := c.TaskManagers()
	if len(live) >= n {
		return died.String(), nil
	}
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

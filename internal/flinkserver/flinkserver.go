// Package flinkserver runs the project's Flink job server: Beam's portable
// Flink job server (Beam 2.62.0, Flink 1.19) with the changes a Go job
// needs (jobserver/src), with an embedded Flink cluster (StartEmbedded),
// against a Flink 1.19 cluster of the user's (StartAgainst), or with a
// session cluster of its own processes on this machine (StartCluster).
// cmd/flinkjobserver is its command; testing/flinktest starts it for the
// tests.
//
// Maven Central publishes no job-server jar: the Maven project in
// jobserver/ depends on the runner module, which holds the driver
// (docs/flink.md), and the job server's own Java sources come first on its
// classpath (docs/flink-jobserver.md). Every listener is on loopback.
package flinkserver

import (
	"cmp"
	"embed"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/beamdedup/beamdedup/internal/maven"
)

// BeamVersion is the Beam release of the job server (jobserver/pom.xml).
const BeamVersion = "2.62.0"

// FlinkVersion is the Flink release the runner module is built for, and
// the one the session cluster runs (FlinkVersion + ".0").
const FlinkVersion = "1.19"

//go:embed jobserver/pom.xml
var pom []byte

//go:embed jobserver/src
var sources embed.FS

// Project is the job server's Maven project: Beam's Flink runner, RocksDB's
// state backend, a log binding, and the job server's own classes.
var Project = &maven.Project{Name: "flink-" + FlinkVersion + "-beam-" + BeamVersion, Pom: pom, Sources: maven.Sub(sources, "jobserver/src")}

// StartTimeout bounds the wait for a started job server to accept jobs,
// and for a TaskManager to register.
var StartTimeout = 2 * time.Minute

// Config is what a job server and its cluster run with. The zero value of
// each field is its default (the constants below); cmd/flinkjobserver's
// flags set them.
type Config struct {
	// Dir holds the configuration (conf/), the logs, and the cluster's
	// checkpoints and savepoints (checkpoints/, savepoints/); it outlives
	// the job server. Empty: a temporary directory, removed by Stop.
	Dir string
	// CheckpointInterval is the checkpoint interval of a Go job in
	// streaming mode that sets none (--checkpointing_interval); negative:
	// none by default.
	CheckpointInterval time.Duration
	// MaxParallelism is the key groups of a job's keyed state unless it
	// sets --max_parallelism (pipeline.max-parallelism).
	MaxParallelism int
	// RestartAttempts and RestartDelay are a failing job's restarts in a
	// row before it fails for good, and the delay before the first
	// (exponential-delay: doubling up to MaxRestartDelay, the count reset
	// after an hour without a failure).
	RestartAttempts int
	RestartDelay    time.Duration
	// HeartbeatInterval and HeartbeatTimeout are Flink's between its
	// JobManager and TaskManagers.
	HeartbeatInterval, HeartbeatTimeout time.Duration
	// TaskManagers and Slots size a session cluster (StartCluster).
	TaskManagers, Slots int
	// ManagedMemoryMB is a TaskManager's managed memory, in MiB: the sort
	// buffers of a job in batch mode (taskmanager.memory.managed.size).
	ManagedMemoryMB int
	// Conf adds to (or overrides) the Flink configuration, key: value.
	Conf map[string]string
}

// Defaults of Config's fields.
const (
	// DefaultCheckpointInterval: a crash replays at most ~5 s of input (the
	// output since the last checkpoint comes out twice unless the sink is
	// transactional).
	DefaultCheckpointInterval = 5 * time.Second
	// DefaultMaxParallelism is Flink's own for a job of parallelism up to
	// 85, so that a savepoint restores on a stock cluster with the same key
	// groups, and rescales up to 128 subtasks.
	DefaultMaxParallelism = 128
	// DefaultRestartAttempts and DefaultRestartDelay: a job whose
	// TaskManager died restarts on the others at once, one waiting for
	// slots retries after 2, 4, 8, 16 and 32 s, and one that cannot run
	// fails after about a minute (each failed attempt leaves Beam's
	// environment objects in the TaskManager's heap). The count starts
	// again after an hour without a failure, so a long job survives many
	// TaskManagers lost.
	DefaultRestartAttempts = 6
	DefaultRestartDelay    = time.Second
	// MaxRestartDelay is the longest delay before a restart.
	MaxRestartDelay = time.Minute
	// DefaultHeartbeatInterval and DefaultHeartbeatTimeout: a killed
	// TaskManager is lost at its first failed heartbeat RPC
	// (heartbeat.rpc-failure-threshold 1); the timeout stays long enough
	// for a loaded machine.
	DefaultHeartbeatInterval = time.Second
	DefaultHeartbeatTimeout  = 30 * time.Second
	DefaultTaskManagers      = 2
	DefaultSlots             = 2
	// DefaultManagedMemoryMB: a batch GroupByKey's record (Beam pre-groups
	// a key's values into one) must fit in one of the sort buffers Flink
	// cuts a slot's share into: 21 MiB at 256 MiB.
	DefaultManagedMemoryMB = 256
)

func (c Config) withDefaults() Config {
	c.CheckpointInterval = cmp.Or(c.CheckpointInterval, DefaultCheckpointInterval)
	c.MaxParallelism = cmp.Or(c.MaxParallelism, DefaultMaxParallelism)
	c.RestartAttempts = cmp.Or(c.RestartAttempts, DefaultRestartAttempts)
	c.RestartDelay = cmp.Or(c.RestartDelay, DefaultRestartDelay)
	c.HeartbeatInterval = cmp.Or(c.HeartbeatInterval, DefaultHeartbeatInterval)
	c.HeartbeatTimeout = cmp.Or(c.HeartbeatTimeout, DefaultHeartbeatTimeout)
	c.TaskManagers = cmp.Or(c.TaskManagers, DefaultTaskManagers)
	c.Slots = cmp.Or(c.Slots, DefaultSlots)
	c.ManagedMemoryMB = cmp.Or(c.ManagedMemoryMB, DefaultManagedMemoryMB)
	return c
}

// flinkConf is the Flink configuration of Config, less a session cluster's
// addresses and memory (clusterConf).
func (c Config) flinkConf(dir string) map[string]string {
	conf := map[string]string{
		"state.checkpoints.dir": "file://" + filepath.Join(dir, "checkpoints"),
		"state.savepoints.dir":  "file://" + filepath.Join(dir, "savepoints"),
		"state.backend.type":    "hashmap",
		// A job's key groups unless it sets --max_parallelism.
		"pipeline.max-parallelism":                                         strconv.Itoa(c.MaxParallelism),
		"restart-strategy.type":                                            "exponential-delay",
		"restart-strategy.exponential-delay.initial-backoff":               fmt.Sprintf("%d ms", c.RestartDelay.Milliseconds()),
		"restart-strategy.exponential-delay.max-backoff":                   fmt.Sprintf("%d ms", MaxRestartDelay.Milliseconds()),
		"restart-strategy.exponential-delay.backoff-multiplier":            "2.0",
		"restart-strategy.exponential-delay.attempts-before-reset-backoff": strconv.Itoa(c.RestartAttempts),
		"restart-strategy.exponential-delay.reset-backoff-threshold":       "1 h",
		"heartbeat.interval":                                               strconv.FormatInt(c.HeartbeatInterval.Milliseconds(), 10),
		"heartbeat.timeout":                                                strconv.FormatInt(c.HeartbeatTimeout.Milliseconds(), 10),
		"heartbeat.rpc-failure-threshold":                                  "1",
		"web.submit.enable":                                                "false",
		// The REST API's metrics are at most this old. Flink's default, 10
		// s, is the floor of a watchdog's stall limit on Flink.
		"metrics.fetcher.update-interval": "1000",
	}
	for k, v := range c.Conf {
		conf[k] = v
	}
	return conf
}

// jobServerJVM are the JVM options that hand Config to the job server.
func (c Config) jobServerJVM() []string {
	if c.CheckpointInterval <= 0 {
		return nil
	}
	return []string{"-Dbeamdedup.checkpointing_interval=" + strconv.FormatInt(c.CheckpointInterval.Milliseconds(), 10)}
}

// prepareDir creates cfg.Dir (or a temporary directory) with conf/, the
// checkpoint and savepoint directories and tmp/, and returns it and
// whether Stop removes it.
func prepareDir(dir string) (string, bool, error) {
	temp := dir == ""
	var err error
	if temp {
		dir, err = os.MkdirTemp("", "flinkserver-")
	} else {
		dir, err = filepath.Abs(dir)
	}
	if err != nil {
		return "", false, err
	}
	for _, d := range []string{"conf", "tmp", "checkpoints", "savepoints"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return "", false, err
		}
	}
	return dir, temp, nil
}

func writeConf(path string, conf map[string]string) error {
	var b strings.Builder
	b.WriteString("# Written by the Flink job server (internal/flinkserver); rewritten at each start.\n")
	for _, k := range slices.Sorted(maps.Keys(conf)) {
		fmt.Fprintf(&b, "%s: %s\n", k, conf[k])
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// freePort returns a free TCP port on the loopback interface.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

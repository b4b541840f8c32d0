// Command flinkjobserver runs the Flink job server of beamdedup: Beam's
// portable Flink job server (Beam 2.62.0's runner, Flink 1.19) with the
// changes a Go job needs, with an embedded Flink cluster, against a Flink
// 1.19 cluster of yours, or with a Flink session cluster of its own
// processes on this machine. It serves until interrupted.
// docs/flink-jobserver.md documents its flags, the Flink version it needs
// and the runner defects it fixes.
//
//	go run github.com/beamdedup/beamdedup/cmd/flinkjobserver@latest --cluster --dir=./flink
//	go run ./cmd/flinkjobserver                              # an embedded cluster
//	go run ./cmd/flinkjobserver --flink-master=HOST:8081     # your cluster's JobManager (REST)
//	go run ./cmd/flinkjobserver states DIR                   # the keyed states a checkpoint holds
//
// It prints JOB_SERVER=localhost:PORT (submit with --runner=flink
// --endpoint=localhost:PORT) and, with --cluster, FLINK_REST=localhost:PORT.
// The first run on a machine resolves the job server's classpath with mvn
// (about 230 MB from Maven Central): it needs java 17 and mvn.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/beamdedup/beamdedup/internal/flinkserver"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "states" {
		os.Exit(states(os.Args[2:]))
	}
	cfg := flinkserver.Config{Conf: map[string]string{}}
	cluster := flag.Bool("cluster", false, "start a Flink "+flinkserver.FlinkVersion+" session cluster of separate processes on this machine (a JobManager and --taskmanagers TaskManagers), every port on 127.0.0.1, and the job server against it")
	master := flag.String("flink-master", "", "the REST address (HOST:PORT) of the JobManager of a running Flink "+flinkserver.FlinkVersion+" cluster to submit to; the job server stages its classpath with every job")
	logs := flag.Bool("logs", false, "print the log files' paths")
	flag.StringVar(&cfg.Dir, "dir", "", "the directory of the checkpoints, savepoints, logs and Flink configuration (embedded and --cluster; with --flink-master, the log); it outlives the job server. Empty: a temporary one, removed when the job server stops")
	interval := flag.Duration("checkpoint-interval", flinkserver.DefaultCheckpointInterval, "the checkpoint interval of a Go job in streaming mode that sets no --checkpointing_interval; 0: none")
	flag.IntVar(&cfg.MaxParallelism, "max-parallelism", flinkserver.DefaultMaxParallelism, "a job's max parallelism (key groups) unless it sets --max_parallelism: the most subtasks a savepoint rescales to; keep it across restores")
	flag.IntVar(&cfg.RestartAttempts, "restart-attempts", flinkserver.DefaultRestartAttempts, "a failing job's restarts in a row before it fails for good (the count starts again after an hour without a failure)")
	flag.DurationVar(&cfg.RestartDelay, "restart-delay", flinkserver.DefaultRestartDelay, "the delay before the first restart (doubled with each failure in a row, up to a minute)")
	flag.DurationVar(&cfg.HeartbeatInterval, "heartbeat-interval", flinkserver.DefaultHeartbeatInterval, "Flink's heartbeat between the JobManager and the TaskManagers")
	flag.DurationVar(&cfg.HeartbeatTimeout, "heartbeat-timeout", flinkserver.DefaultHeartbeatTimeout, "how long a TaskManager that stops answering heartbeats stays registered (one that refuses them is dropped at once)")
	flag.IntVar(&cfg.TaskManagers, "taskmanagers", flinkserver.DefaultTaskManagers, "with --cluster: how many TaskManagers")
	flag.IntVar(&cfg.Slots, "slots", flinkserver.DefaultSlots, "with --cluster: each TaskManager's task slots")
	flag.IntVar(&cfg.ManagedMemoryMB, "managed-memory", flinkserver.DefaultManagedMemoryMB, "with --cluster: each TaskManager's managed memory in MiB (a batch job's sort buffers: a grouped record must fit in one, about a twelfth of a slot's share)")
	flag.Func("conf", "a Flink configuration entry KEY=VALUE (repeatable), added to or overriding the job server's", func(s string) error {
		k, v, ok := strings.Cut(s, "=")
		if !ok || k == "" {
			return fmt.Errorf("want KEY=VALUE, got %q", s)
		}
		cfg.Conf[strings.TrimSpace(k)] = strings.TrimSpace(v)
		return nil
	})
	flag.Parse()
	if *cluster && *master != "" {
		fmt.Fprintln(os.Stderr, "flinkjobserver: --cluster and --flink-master are exclusive")
		os.Exit(2)
	}
	cfg.CheckpointInterval = *interval
	if *interval <= 0 {
		cfg.CheckpointInterval = -1
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	stop, err := start(cfg, *cluster, *master, *logs)
	if err != nil {
		fmt.Fprintln(os.Stderr, "flinkjobserver:", err)
		os.Exit(1)
	}
	<-sig
	stop()
}

// start starts the job server (and cluster) cfg, cluster and master say,
// prints where it is, and returns its stop.
func start(cfg flinkserver.Config, cluster bool, master string, logs bool) (func(), error) {
	defaults := "Go jobs: no checkpoints unless they set --checkpointing_interval"
	if cfg.CheckpointInterval > 0 {
		defaults = fmt.Sprintf("Go jobs in streaming mode checkpoint every %v unless they set --checkpointing_interval", cfg.CheckpointInterval)
	}
	kept := "kept after the job server stops"
	if cfg.Dir == "" {
		kept = "a temporary directory, removed when the job server stops: --dir keeps them"
	}
	switch {
	case cluster:
		c, err := flinkserver.StartCluster(cfg)
		if err != nil {
			return nil, err
		}
		fmt.Printf("JOB_SERVER=%s\nFLINK_REST=%s\n", c.Endpoint, c.REST)
		fmt.Printf("# Beam %s job server against a Flink %s.0 session cluster (1 JobManager, %d TaskManagers); submit with --runner=flink --endpoint=%s --flink_rest=%s (Ctrl-C stops it)\n",
			flinkserver.BeamVersion, flinkserver.FlinkVersion, len(c.TaskManagers()), c.Endpoint, c.REST)
		fmt.Printf("# %s\n# checkpoints %s, savepoints %s (%s)\n", defaults, c.Checkpoints, c.Savepoints, kept)
		if logs {
			fmt.Printf("# logs: %s/*.log\n", c.Dir)
		}
		return c.Stop, nil
	case master != "":
		s, err := flinkserver.StartAgainst(master, cfg)
		if err != nil {
			return nil, err
		}
		fmt.Printf("JOB_SERVER=%s\n", s.Endpoint)
		fmt.Printf("# Beam %s job server against the Flink cluster at %s; submit with --runner=flink --endpoint=%s --flink_rest=%s (Ctrl-C stops it)\n# %s\n",
			flinkserver.BeamVersion, master, s.Endpoint, master, defaults)
		if logs {
			fmt.Printf("# log: %s\n", s.LogFile())
		}
		return s.Stop, nil
	default:
		s, err := flinkserver.StartEmbedded(cfg)
		if err != nil {
			return nil, err
		}
		fmt.Printf("JOB_SERVER=%s\n", s.Endpoint)
		fmt.Printf("# Beam %s job server, Flink %s embedded; submit with --runner=flink --endpoint=%s (Ctrl-C stops it)\n# %s\n# checkpoints and savepoints in %s (%s)\n",
			flinkserver.BeamVersion, flinkserver.FlinkVersion, s.Endpoint, defaults, s.Dir, kept)
		if logs {
			fmt.Printf("# log: %s\n", s.LogFile())
		}
		return s.Stop, nil
	}
}

// states prints the keyed states each operator of a checkpoint or savepoint
// registered, as JSON.
func states(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: flinkjobserver states CHECKPOINT_OR_SAVEPOINT_DIR")
		return 2
	}
	ops, err := flinkserver.CheckpointStates(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, "flinkjobserver:", err)
		return 1
	}
	b, _ := json.MarshalIndent(ops, "", "  ")
	fmt.Println(string(b))
	return 0
}

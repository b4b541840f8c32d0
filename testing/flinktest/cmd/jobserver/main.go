// Command jobserver starts Beam's Flink job server, with an embedded Flink
// cluster, against a Flink cluster of yours, or with a session cluster of
// its own processes on this machine; or Beam's Spark job server with a
// local Spark (testing/flinktest). It serves until interrupted: the job
// servers of docs/runners.md's Flink and Spark sections. The first run on
// a machine resolves the classpath with mvn (Flink: about 230 MB from
// Maven Central).
//
//	go run ./testing/flinktest/cmd/jobserver                              # Flink, embedded
//	go run ./testing/flinktest/cmd/jobserver --cluster                    # a JobManager and two TaskManagers
//	go run ./testing/flinktest/cmd/jobserver --flink-master=HOST:8081     # your cluster's JobManager (REST)
//	go run ./testing/flinktest/cmd/jobserver --runner=spark               # Spark
//	# JOB_SERVER=localhost:PORT: submit with --runner=flink --endpoint=localhost:PORT
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/beamdedup/beamdedup/testing/flinktest"
)

func main() {
	runner := flag.String("runner", "flink", "flink or spark")
	logs := flag.Bool("logs", false, "print the log files' paths")
	cluster := flag.Bool("cluster", false, "flink: start a Flink session cluster of separate processes on this machine (a JobManager, --taskmanagers TaskManagers), every port on 127.0.0.1, and the job server against it")
	taskManagers := flag.Int("taskmanagers", 2, "with --cluster: how many TaskManagers (two slots each)")
	master := flag.String("flink-master", "", "flink: the REST address (HOST:PORT) of the JobManager of a running Flink 1.19 cluster to submit to; the job server stages its classpath with every job, as Beam's does")
	flag.Parse()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	switch {
	case *runner == "flink" && *cluster:
		c, err := flinktest.StartCluster(flinktest.ClusterConfig{TaskManagers: *taskManagers})
		if err != nil {
			fmt.Fprintln(os.Stderr, "jobserver:", err)
			os.Exit(1)
		}
		fmt.Printf("JOB_SERVER=%s\nFLINK_REST=%s\n", c.Endpoint, c.REST)
		fmt.Printf("# Beam %s job server against a Flink %s session cluster (1 JobManager, %d TaskManagers); submit with --runner=flink --endpoint=%s --flink_rest=%s (Ctrl-C stops it)\n",
			flinktest.BeamVersion, flinktest.FlinkVersion, *taskManagers, c.Endpoint, c.REST)
		fmt.Printf("# checkpoints %s, savepoints %s\n", c.Checkpoints, c.Savepoints)
		if *logs {
			fmt.Printf("# logs: %s/*.log\n", c.Dir)
		}
		<-sig
		c.Stop()
		return
	case *runner == "flink" || *runner == "spark":
	default:
		fmt.Fprintf(os.Stderr, "jobserver: --runner=%s: want flink or spark\n", *runner)
		os.Exit(2)
	}
	if *runner == "spark" && (*cluster || *master != "") {
		fmt.Fprintln(os.Stderr, "jobserver: --cluster and --flink-master are for --runner=flink")
		os.Exit(2)
	}
	js, version := flinktest.Flink, "Flink "+flinktest.FlinkVersion+" embedded"
	if *runner == "spark" {
		js, version = flinktest.Spark, "Spark "+flinktest.SparkVersion+" local[2]"
	}
	if *master != "" {
		js, version = flinktest.Flink.Against(*master), "against the Flink cluster at "+*master
	}
	srv, err := js.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "jobserver:", err)
		os.Exit(1)
	}
	fmt.Printf("JOB_SERVER=%s\n", srv.Endpoint)
	fmt.Printf("# Beam %s job server, %s; submit with --runner=%s --endpoint=%s (Ctrl-C stops it)\n",
		flinktest.BeamVersion, version, *runner, srv.Endpoint)
	if *logs {
		fmt.Printf("# log: %s\n", srv.LogFile())
	}
	<-sig
	srv.Stop()
}

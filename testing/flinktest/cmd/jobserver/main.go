// Command jobserver starts Beam's Flink job server with its embedded Flink
// cluster, or Beam's Spark job server with a local Spark
// (testing/flinktest), and serves until interrupted: the job servers of
// docs/runners.md's Flink and Spark sections. The first run on a machine
// resolves the classpath with mvn (Flink: about 230 MB from Maven Central).
//
//	go run ./testing/flinktest/cmd/jobserver                 # Flink
//	go run ./testing/flinktest/cmd/jobserver --runner=spark  # Spark
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
	logs := flag.Bool("logs", false, "print the job server's log file's path")
	flag.Parse()
	js, version := flinktest.Flink, "Flink "+flinktest.FlinkVersion+" embedded"
	switch *runner {
	case "flink":
	case "spark":
		js, version = flinktest.Spark, "Spark "+flinktest.SparkVersion+" local[2]"
	default:
		fmt.Fprintf(os.Stderr, "jobserver: --runner=%s: want flink or spark\n", *runner)
		os.Exit(2)
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
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	srv.Stop()
}

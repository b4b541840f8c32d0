// Command sparkjobserver starts Beam's Spark job server (Beam 2.62.0) with
// a local Spark (two threads) and serves until interrupted: the job server
// of docs/runners.md's Spark section. The first run on a machine resolves
// its classpath with mvn. (The Flink job server is cmd/flinkjobserver.)
//
//	go run ./testing/flinktest/cmd/sparkjobserver
//	# JOB_SERVER=localhost:PORT: submit with --runner=spark --endpoint=localhost:PORT
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/beamdedup/beamdedup/internal/flinkserver"
	"github.com/beamdedup/beamdedup/testing/flinktest"
)

func main() {
	logs := flag.Bool("logs", false, "print the log file's path")
	flag.Parse()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	srv, err := flinktest.Spark.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "sparkjobserver:", err)
		os.Exit(1)
	}
	fmt.Printf("JOB_SERVER=%s\n", srv.Endpoint)
	fmt.Printf("# Beam %s Spark job server, Spark %s local[2]; submit with --runner=spark --endpoint=%s (Ctrl-C stops it)\n",
		flinkserver.BeamVersion, flinktest.SparkVersion, srv.Endpoint)
	if *logs {
		fmt.Printf("# log: %s\n", srv.LogFile())
	}
	<-sig
	srv.Stop()
}

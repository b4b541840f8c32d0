// Command jobserver starts Beam's Flink job server with its embedded Flink
// cluster (testing/flinktest) and serves until interrupted: the job server
// of docs/runners.md's Flink section. The first run on a machine resolves
// its classpath with mvn (about 230 MB from Maven Central).
//
//	go run ./testing/flinktest/cmd/jobserver
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
	logs := flag.Bool("logs", false, "print the job server's log file's path")
	flag.Parse()
	srv, err := flinktest.Flink.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "jobserver:", err)
		os.Exit(1)
	}
	fmt.Printf("JOB_SERVER=%s\n", srv.Endpoint)
	fmt.Printf("# Beam %s job server, Flink %s embedded; submit with --runner=flink --endpoint=%s (Ctrl-C stops it)\n",
		flinktest.BeamVersion, flinktest.FlinkVersion, srv.Endpoint)
	if *logs {
		fmt.Printf("# log: %s\n", srv.LogFile())
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	srv.Stop()
}

// Command jvmpeer runs one of the JVM peers (testing/peers) and prints its
// result lines: the Flink SQL peer (flinksql), the Beam Java peer on its
// direct runner (beamjava) or on Flink's classic runner (beamjava-flink).
// The first run on a machine resolves the project's classpath with mvn.
//
//	go run ./testing/peers/cmd/jvmpeer flinksql changelog /tmp/peers/orderstatus.jsonl
//	go run ./testing/peers/cmd/jvmpeer flinksql orders /tmp/peers/orders.jsonl
//	go run ./testing/peers/cmd/jvmpeer flinksql nexmark /tmp/peers/bids.jsonl
//	go run ./testing/peers/cmd/jvmpeer beamjava /tmp/peers/orders.jsonl
//	go run ./testing/peers/cmd/jvmpeer beamjava-flink /tmp/peers/orders.jsonl --runner=FlinkRunner --flinkMaster=[local]
//	go run ./testing/peers/cmd/jvmpeer resolve   # what the tests need: the Flink job server, the Flink SQL peer, the Kafka broker
package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/beamdedup/beamdedup/internal/flinkserver"
	"github.com/beamdedup/beamdedup/internal/maven"
	"github.com/beamdedup/beamdedup/testing/kafkatest"
	"github.com/beamdedup/beamdedup/testing/peers"
)

func main() {
	if len(os.Args) == 2 && os.Args[1] == "resolve" {
		// .ci/run, before the tests: a fresh machine's downloads do not
		// count against a test's deadline.
		for _, p := range []*maven.Project{flinkserver.Project, peers.FlinkSQL, kafkatest.Project} {
			if _, err := p.Classpath(); err != nil {
				fmt.Fprintln(os.Stderr, "jvmpeer:", err)
				os.Exit(1)
			}
			fmt.Printf("resolved %s\n", p.Name)
		}
		return
	}
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: jvmpeer flinksql|beamjava|beamjava-flink ARGS...")
		os.Exit(2)
	}
	var p *maven.Project
	main := peers.BeamJavaMain
	args := os.Args[2:]
	switch os.Args[1] {
	case "flinksql":
		p, main = peers.FlinkSQL, peers.FlinkSQLMain
		if len(args) == 2 {
			args[1], _ = filepath.Abs(args[1])
		}
	case "beamjava":
		p = peers.BeamJava
	case "beamjava-flink":
		p = peers.BeamJavaFlink
	default:
		fmt.Fprintf(os.Stderr, "jvmpeer: unknown peer %s\n", os.Args[1])
		os.Exit(2)
	}
	res, err := peers.Run(context.Background(), p, main, args...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "jvmpeer:", err)
		os.Exit(1)
	}
	for _, n := range slices.Sorted(maps.Keys(res)) {
		fmt.Print(n)
		for _, k := range slices.Sorted(maps.Keys(res[n])) {
			fmt.Printf(" %s=%s", k, res[n][k])
		}
		fmt.Println()
	}
}

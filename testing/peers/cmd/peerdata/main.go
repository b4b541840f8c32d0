// Command peerdata writes the input files the peers (Flink SQL, Beam
// Python, Beam Java) read, from the generators our pipelines and
// benchmarks use, so that every side of a comparison reads the same rows.
//
//	go run ./testing/peers/cmd/peerdata --kind=orderstatus --out=/tmp/peers/orderstatus.jsonl
//	go run ./testing/peers/cmd/peerdata --kind=orders --count=100000 --out=/tmp/peers/orders.jsonl
//	go run ./testing/peers/cmd/peerdata --kind=nexmark --count=200000 --out=/tmp/peers/bids.jsonl
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/beamdedup/beamdedup/pipelines/orders"
	"github.com/beamdedup/beamdedup/pipelines/orderstatus"
	"github.com/beamdedup/beamdedup/testing/peers"
)

func main() {
	kind := flag.String("kind", "orderstatus", "orderstatus (seed 003's shape), orders or nexmark")
	out := flag.String("out", "", "the JSON Lines file to write (required)")
	count := flag.Int("count", 0, "orders (orders), Nexmark events (nexmark); 0: 100,000 / 200,000")
	seed := flag.Uint64("seed", 1, "the generator's seed (orderstatus: seed 3 unless given)")
	late := flag.Int("late", -1, "orderstatus: events delivered after their order's next status (-1: the default, 12)")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "peerdata: --out is required")
		os.Exit(2)
	}
	var err error
	switch *kind {
	case "orderstatus":
		cfg := orderstatus.DefaultGen
		if *late >= 0 {
			cfg.Late = *late
		}
		if flagGiven("seed") {
			cfg.Seed = *seed
		}
		err = orderstatus.WriteSample(*out, cfg)
	case "orders":
		err = orders.WriteSample(*out, orDefault(*count, 100_000), *seed)
	case "nexmark":
		var n int
		n, err = peers.WriteNexmarkBids(*out, orDefault(*count, 200_000), *seed)
		fmt.Printf("%d bids\n", n)
	default:
		err = fmt.Errorf("unknown --kind=%s", *kind)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "peerdata:", err)
		os.Exit(1)
	}
}

func orDefault(n, def int) int {
	if n > 0 {
		return n
	}
	return def
}

func flagGiven(name string) bool {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

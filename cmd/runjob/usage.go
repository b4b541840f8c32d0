package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

const examples = `Usage: runjob [flags]

Runs a sample deduplication pipeline as a job and prints a summary from the
job's metrics. A job that makes no progress for --stall_limit is cancelled
with one line saying what did not happen.

Examples:
  # generated orders, deduplicated by order_id on Prism in this process
  go run ./cmd/runjob
  # event-time dedup of the spec's user_events; changelog to insert-only
  go run ./cmd/runjob --pipeline=userevents
  go run ./cmd/runjob --pipeline=cdc --input=changes.jsonl --output=/tmp/first.jsonl
  # your own key and retention
  go run ./cmd/runjob --partition_by=order_id,price --state_ttl=30m --reset_ttl_on_duplicate=false
  # any Beam job server (a standalone Prism, Flink's, Spark's)
  go run ./cmd/runjob --runner=universal --endpoint=localhost:8073 --environment_type=LOOPBACK
  go run ./cmd/runjob --runner=flink --endpoint=localhost:8099 --environment_type=LOOPBACK --event_time_ttl=2h --state_ttl=0
  # the workers in a worker pool, started from the staged runjob binary (docs/workers.md)
  go build -o runjob ./cmd/runjob && ./runjob --runner=universal --endpoint=localhost:8073 \
      --environment_type=EXTERNAL --environment_config=localhost:50000 --worker_binary=./runjob
  # Dataflow: translate offline, or submit
  go run ./cmd/runjob --runner=dataflow --dry_run --project=p --region=r --staging_location=gs://b/s
  go run ./cmd/runjob --runner=dataflow --project=p --region=us-central1 --staging_location=gs://b/staging \
      --input=gs://b/orders/*.jsonl --output=gs://b/out/orders.jsonl
  # the pipeline graph
  go run ./cmd/runjob --graph=orders.dot && dot -Tpng orders.dot > orders.png
  # the Pub/Sub streaming demo (in-process Pub/Sub fake)
  go run ./cmd/runjob --pipeline=streaming --count=200
  # deduplicate a Pub/Sub subscription until Ctrl-C (drains, then exits);
  # on an emulator when PUBSUB_EMULATOR_HOST is set (docs/streaming-pubsub.md)
  go run ./cmd/runjob --pipeline=streaming --subscription=projects/P/subscriptions/orders-sub \
      --output_topic=projects/P/topics/orders-deduped --dead_letter_topic=projects/P/topics/orders-dlq
  # keep-last by order, then a count per status, beside the naive count
  go run ./cmd/runjob --pipeline=orderstatus
  # seed 001 on Kafka: a local broker, generated orders with duplicates in a
  # 2-partition topic, deduplicated into orders_deduplicated (docs/kafka.md)
  go run ./testing/kafkatest/cmd/kafkabroker   # prints KAFKA_BROKERS=127.0.0.1:PORT
  go run ./cmd/runjob --pipeline=kafka --brokers=127.0.0.1:PORT --produce --idle_stop=5s
`

// beamFlags are the Beam flags --help lists; every other Beam flag is
// accepted too.
var beamFlags = []string{
	"runner", "endpoint", "environment_type", "environment_config", "worker_binary", "job_name",
	"project", "region", "staging_location", "temp_location", "dry_run", "async", "experiments", "dot_file",
}

func usage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprint(w, examples)
	fmt.Fprintln(w, "\nFlags:")
	listed := map[string]bool{}
	for _, n := range beamFlags {
		listed[n] = true
	}
	others := 0
	fs.VisitAll(func(f *flag.Flag) {
		if flag.CommandLine.Lookup(f.Name) == nil {
			printFlag(w, f)
		} else if !listed[f.Name] {
			others++
		}
	})
	fmt.Fprintln(w, "\nBeam flags (runner selection and submission):")
	for _, n := range beamFlags {
		if f := fs.Lookup(n); f != nil {
			printFlag(w, f)
		}
	}
	fmt.Fprintf(w, "\nThe %d other flags of Beam's Go SDK are accepted as well.\n", others)
	fmt.Fprintln(w, "Runners: prism (default), direct (mapped to prism: it has no state or timers), universal/portable, flink, spark (--endpoint of a job server), dataflow, dot.")
}

func printFlag(w io.Writer, f *flag.Flag) {
	name, u := flag.UnquoteUsage(f)
	line := "  --" + f.Name
	if name != "" {
		line += "=" + name
	}
	def := ""
	if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "false" && f.DefValue != "0s" {
		def = fmt.Sprintf(" (default %s)", f.DefValue)
	}
	fmt.Fprintf(w, "%s\n      %s%s\n", line, strings.ReplaceAll(u, "\n", "\n      "), def)
}

// Command kafkaversus runs seed 001 on one Kafka broker, side by side: our
// Kafka → KeepFirst → Kafka pipeline on Prism in this process
// (pipelines/streaming, runjob --pipeline=kafka), Flink SQL's own version
// (the flinksql peer) and, with --xlang, Beam Go's xlang kafkaio,
// alternating runs on the same input topic, each timed to the broker's
// append of its last output record (docs/kafka.md, "Side by side"), and
// prints each run, the medians and the ratio.
//
//	go run ./testing/peers/cmd/peerdata --kind=orders --count=850000 --out=/tmp/peers/orders850k.jsonl
//	go run ./testing/peers/cmd/kafkaversus --input=/tmp/peers/orders850k.jsonl --runs=3
//
// Without --brokers it starts a broker of its own (testing/kafkatest,
// 512 MB heap) and removes it at the end.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/flink"

	"github.com/beamdedup/beamdedup/internal/flinkopts"
	"github.com/beamdedup/beamdedup/internal/flinkserver"
	"github.com/beamdedup/beamdedup/internal/jobrun"
	"github.com/beamdedup/beamdedup/internal/jobrun/localprism"
	"github.com/beamdedup/beamdedup/pipelines/streaming"
	"github.com/beamdedup/beamdedup/testing/bench"
	"github.com/beamdedup/beamdedup/testing/kafkatest"
	"github.com/beamdedup/beamdedup/testing/peers"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/kafkaio"
)

var (
	input       = flag.String("input", "", "orders, JSON Lines (testing/peers/cmd/peerdata --kind=orders) (required)")
	runs        = flag.Int("runs", 3, "runs of each side, alternating")
	brokersFlag = flag.String("brokers", "", "a broker to use (host:port); empty: start one (testing/kafkatest)")
	parallelism = flag.Int("flink_parallelism", 1, "the Flink SQL job's parallelism")
	idleStop    = flag.Duration("idle_stop", 2*time.Second, "ours: end once every partition was read to its end and idle this long (not counted: the time is to the last output record)")
	sidesFlag   = flag.String("sides", "ours,flink", "the compared sides, comma-separated: ours, flink, ours_in_flight=N (ours with MaxInFlight(N), 0: no bound), ours_txn (ours with Transactional writes), ours_buckets=N (ours with StateBuckets(N)), ours_cluster (ours on a Flink session cluster of its own, streaming, a checkpoint every 5 s, LOOPBACK workers in this process), ours_cluster_buckets=N (that with StateBuckets(N)), any number of those")
	xlang       = flag.String("xlang", "", "also Beam Go's xlang kafkaio (Java's KafkaIO through an expansion service, Java's SDK harness as an EXTERNAL worker pool) on these runners, comma-separated: prism (in this process), flink (the Flink job server with its embedded cluster, internal/flinkserver)")
	noOutput    = flag.Duration("xlang_no_output", 3*time.Minute, "xlang: cancel a run that wrote nothing for this long")
	timeout     = flag.Duration("timeout", 30*time.Minute, "a deadline for everything")
)

func main() {
	// Set, a flag reaches the job server as a pipeline option of its name.
	flag.Int64("checkpointing_interval", 0, "xlang on flink: Flink's checkpoint interval in ms, as a pipeline option (every job gets it; Prism ignores it); unset: no checkpoints")
	flag.Parse()
	beam.Init()
	defer jobrun.DisableSplits()() // as runjob on Prism (notes/beam-defects.md, entry 9)
	if *input == "" {
		fail(fmt.Errorf("--input is required"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := run(ctx); err != nil {
		fail(err)
	}
}

// side runs one side into its own output and dead-letter topics.
type side struct {
	name string
	run  func(ctx context.Context, group, out, dead string) (peers.KafkaTiming, error)
	// compared: in the medians' ratio (ours against Flink SQL).
	compared bool
}

func run(ctx context.Context) error {
	brokers := *brokersFlag
	rows, err := peers.ReadOrdersFile(*input)
	if err != nil {
		return err
	}
	distinct := map[string]bool{}
	for _, o := range rows {
		distinct[o.OrderID] = true
	}
	if brokers == "" {
		b, err := kafkatest.Start(ctx, kafkatest.Options{})
		if err != nil {
			return err
		}
		defer b.Close()
		brokers = b.Addr
	}
	printLoad()
	const in = "orders_with_duplicates"
	if err := streaming.CreateTopics(ctx, brokers, 2, in); err != nil {
		return err
	}
	start := time.Now()
	if err := streaming.ProduceOrders(ctx, brokers, in, rows); err != nil {
		return err
	}
	fmt.Printf("input %s on %s: %d records for %d orders, 2 partitions (written in %v)\n",
		in, brokers, len(rows), len(distinct), time.Since(start).Round(time.Millisecond))
	job, err := localprism.Options(jobrun.Options{Runner: "prism", StallLimit: 2 * time.Minute, What: "kafka job"})
	if err != nil {
		return err
	}
	var sides []side
	for _, sd := range strings.Split(*sidesFlag, ",") {
		switch sd, n, _ := strings.Cut(strings.TrimSpace(sd), "="); sd {
		case "ours", "ours_in_flight", "ours_txn", "ours_buckets":
			name, how, err := oursSide(sd, n)
			if err != nil {
				return err
			}
			sides = append(sides, side{name, func(ctx context.Context, group, out, dead string) (peers.KafkaTiming, error) {
				return peers.OursKafka(ctx, job, brokers, in, out, dead, group, len(rows), *idleStop, how)
			}, true})
		case "ours_cluster", "ours_cluster_buckets":
			name, how := "ours_kafka_flink_cluster", peers.OursKafkaOptions{}
			if sd == "ours_cluster_buckets" {
				v, err := sideNumber(sd, n)
				if err != nil {
					return err
				}
				name, how.Dedup = name+"_buckets_"+n, []dedup.Option{dedup.StateBuckets(v)}
			}
			c, err := flinkserver.StartCluster(flinkserver.Config{})
			if err != nil {
				return err
			}
			defer c.Stop()
			cluster := jobrun.Options{Runner: "flink", Endpoint: c.Endpoint, FlinkREST: c.REST, EnvironmentType: "LOOPBACK",
				StallLimit: 2 * time.Minute, What: "kafka job", Flink: flinkopts.Options{Streaming: true, CheckpointingInterval: 5 * time.Second}}
			how.Savepoints = c.Savepoints
			sides = append(sides, side{name, func(ctx context.Context, group, out, dead string) (peers.KafkaTiming, error) {
				return peers.OursKafka(ctx, cluster, brokers, in, out, dead, group, len(rows), *idleStop, how)
			}, true})
		case "flink":
			sides = append(sides, side{"flink_sql_kafka", func(ctx context.Context, group, out, _ string) (peers.KafkaTiming, error) {
				return peers.FlinkSQLKafka(ctx, brokers, in, out, group, len(rows), *parallelism)
			}, true})
		default:
			return fmt.Errorf("--sides: unknown side %q", sd)
		}
	}
	more, closeXlang, err := xlangSides(ctx, brokers, in, len(rows), len(distinct))
	defer closeXlang()
	if err != nil {
		return err
	}
	sides = append(sides, more...)
	rates := map[string][]float64{}
	for i := range *runs {
		for _, sd := range sides {
			name := fmt.Sprintf("%s_%d", sd.name, i+1)
			out, dead := name+"_out", name+"_dead"
			if err := peers.CreateOutputTopics(ctx, brokers, out, dead); err != nil {
				return err
			}
			t, err := sd.run(ctx, name, out, dead)
			t.Side = sd.name
			if err != nil && sd.compared {
				return fmt.Errorf("run %d %s: %w", i+1, sd.name, err)
			}
			if err != nil {
				fmt.Printf("run %d %s failed: %v\n", i+1, sd.name, err)
				continue
			}
			fmt.Printf("run %d %v\n", i+1, t)
			if t.Distinct != len(distinct) {
				return fmt.Errorf("run %d %s: %d distinct orders out, want %d", i+1, sd.name, t.Distinct, len(distinct))
			}
			rates[sd.name] = append(rates[sd.name], t.RecordsPerSecond())
		}
	}
	for _, sd := range sides {
		fmt.Printf("median %s records_per_s=%.0f (%s)\n", sd.name, bench.Median(rates[sd.name]), spread(rates[sd.name]))
	}
	if flink := bench.Median(rates["flink_sql_kafka"]); flink > 0 {
		for _, sd := range sides {
			if sd.compared && sd.name != "flink_sql_kafka" {
				fmt.Printf("ratio %s/flink_sql_kafka=%.2f\n", sd.name, bench.Median(rates[sd.name])/flink)
			}
		}
	}
	printLoad()
	return nil
}

// oursSide is the side of ours that --sides names sd=n.
func oursSide(sd, n string) (string, peers.OursKafkaOptions, error) {
	var how peers.OursKafkaOptions
	if sd == "ours_txn" {
		how.Write = []kafkaio.Option{kafkaio.Transactional(fmt.Sprintf("kafkaversus-%d", time.Now().UnixNano()))}
		return "ours_kafka_prism_txn", how, nil
	}
	if sd == "ours" {
		return "ours_kafka_prism", how, nil
	}
	v, err := sideNumber(sd, n)
	if err != nil {
		return "", how, err
	}
	if sd == "ours_buckets" {
		how.Dedup = []dedup.Option{dedup.StateBuckets(v)}
		return "ours_kafka_prism_buckets_" + n, how, nil
	}
	how.Read = []kafkaio.Option{kafkaio.MaxInFlight(v)}
	return "ours_kafka_prism_" + strings.TrimPrefix(sd, "ours_") + "_" + n, how, nil
}

// sideNumber is the N of a side given as sd=N.
func sideNumber(sd, n string) (int, error) {
	v, err := strconv.Atoi(n)
	if err != nil {
		return 0, fmt.Errorf("--sides: %s=%s: %v", sd, n, err)
	}
	return v, nil
}

// xlangSides are the xlang kafkaio sides on the runners --xlang names,
// with the expansion service and Java worker pool they share (and the
// Flink job server), and a func that stops what was started, error or not.
func xlangSides(ctx context.Context, brokers, in string, records, distinct int) ([]side, func(), error) {
	var stops []func()
	closeAll := func() {
		for _, s := range stops {
			s()
		}
	}
	if *xlang == "" {
		return nil, closeAll, nil
	}
	x, err := peers.StartXlang(ctx)
	if err != nil {
		return nil, closeAll, err
	}
	stops = append(stops, x.Close)
	var sides []side
	for _, r := range strings.Split(*xlang, ",") {
		var job jobrun.Options
		switch r = strings.TrimSpace(r); r {
		case "prism":
			if job, err = localprism.Options(jobrun.Options{}); err != nil {
				return nil, closeAll, err
			}
		case "flink":
			srv, err := flinkserver.StartEmbedded(flinkserver.Config{})
			if err != nil {
				return nil, closeAll, err
			}
			stops = append(stops, srv.Stop)
			job = jobrun.Options{Runner: "flink", Endpoint: srv.Endpoint, EnvironmentType: "LOOPBACK"}
		default:
			return nil, closeAll, fmt.Errorf("--xlang: unknown runner %q; want prism or flink", r)
		}
		name := "xlang_kafkaio_" + r
		sides = append(sides, side{name: name, run: func(ctx context.Context, group, out, _ string) (peers.KafkaTiming, error) {
			t, err := peers.XlangKafka(ctx, x, job, name, brokers, in, out, group, records, distinct, *noOutput, 20*time.Minute)
			if err != nil {
				err = fmt.Errorf("%w\n%s", err, x.Logs())
			}
			return t, err
		}})
	}
	return sides, closeAll, nil
}

func spread(v []float64) string {
	if len(v) == 0 {
		return "no runs"
	}
	return fmt.Sprintf("%.0f–%.0f over %d runs", slices.Min(v), slices.Max(v), len(v))
}

// printLoad prints the machine's load averages and the time.
func printLoad() {
	fmt.Printf("load average %s (1, 5, 15 min; %s)\n", bench.LoadAvg(), time.Now().UTC().Format("2006-01-02 15:04 UTC"))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "kafkaversus:", err)
	os.Exit(1)
}

package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamdedup/beamdedup/internal/jobrun"
	"github.com/beamdedup/beamdedup/pipelines/orders"
	"github.com/beamdedup/beamdedup/pipelines/streaming"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/kafkaio"
)

// The topics and group of --pipeline=kafka unless told: seed 001's.
const (
	defaultInputTopic      = "orders_with_duplicates"
	defaultOutputTopic     = "orders_deduplicated"
	defaultDeadLetterTopic = "orders_dead_letters"
	defaultGroup           = "beamdedup-orders"
)

// kafkaOptions are the flags of --pipeline=kafka; --output_topic,
// --dead_letter_topic, --drain_timeout and --progress are shared with the
// streaming pipeline's run against a subscription (liveOptions).
type kafkaOptions struct {
	brokers    string
	inputTopic string
	group      string
	produce    bool
	idleStop   time.Duration
	watch      time.Duration
	inFlight   int
	resume     bool
	txnID      string
	produced   int // records written by --produce
}

func addKafkaFlags(fs *flag.FlagSet, k *kafkaOptions) {
	fs.StringVar(&k.brokers, "brokers", os.Getenv("KAFKA_BROKERS"), "kafka: the bootstrap brokers, host:port[,host:port] (default $KAFKA_BROKERS; go run ./testing/kafkatest/cmd/kafkabroker serves one)")
	fs.StringVar(&k.inputTopic, "input_topic", defaultInputTopic, "kafka: read this topic (orders as JSON, keyed by order_id) until stopped (Ctrl-C or SIGTERM, --timeout when given, or --idle_stop)")
	fs.StringVar(&k.group, "group", defaultGroup, "kafka: the consumer group the run starts from and commits, each offset only once every record before it is written, dead-lettered or dropped as a duplicate")
	fs.BoolVar(&k.produce, "produce", false, "kafka: first write --count generated orders (--seed; every order priced under 100 twice, as seed 001) and 3 undecodable values to --input_topic, creating missing topics (2 partitions)")
	fs.DurationVar(&k.idleStop, "idle_stop", 0, "kafka: end the run once every partition was read to its end and nothing came for this long (0: run until stopped)")
	fs.DurationVar(&k.watch, "watch_partitions", 0, "kafka: list the input topic's partitions again this often and read those added while running (0: listed once, at the start)")
	fs.BoolVar(&k.resume, "resume", true, "kafka on --runner=flink with --flink_rest, a cluster whose state directories are on this machine: restore the newest savepoint or retained checkpoint of the group's job there (unless --savepoint_path names one), and stop with a savepoint there on Ctrl-C or at an --idle_stop end; false: start with no state, stop by draining")
	fs.StringVar(&k.txnID, "transactional_id", "", "kafka: write the output and the dead letters in Kafka transactions, under transactional ids beginning with this (the same on each restart), so that a read_committed consumer sees each order once; on a Flink cluster a transaction is committed once a checkpoint after it completed (empty: at least once)")
	fs.IntVar(&k.inFlight, "max_in_flight", 20000, "kafka: read at most this many records of a partition ahead of its group's committed offset, which bounds what a crash makes the next run read again (0: no bound)")
}

// checkKafka rejects an incomplete or inconsistent set of Kafka flags, and
// fills in the topics' defaults.
func checkKafka(o *options) error {
	k, l := &o.kafka, &o.live
	if k.brokers == "" {
		return fmt.Errorf("--pipeline=kafka needs --brokers (or $KAFKA_BROKERS): host:port of a Kafka broker; for a local one, go run ./testing/kafkatest/cmd/kafkabroker")
	}
	if !o.set["output_topic"] {
		l.outputTopic = defaultOutputTopic
	}
	if !o.set["dead_letter_topic"] {
		l.deadLetterTopic = defaultDeadLetterTopic
	}
	if k.inputTopic == l.outputTopic || k.inputTopic == l.deadLetterTopic || l.outputTopic == l.deadLetterTopic {
		return fmt.Errorf("--input_topic, --output_topic and --dead_letter_topic must be three topics, got %s, %s, %s", k.inputTopic, l.outputTopic, l.deadLetterTopic)
	}
	if k.group == "" {
		return fmt.Errorf("--group is empty; want the consumer group whose offsets the run starts from and commits")
	}
	if k.idleStop < 0 || l.drainTimeout <= 0 || l.progress <= 0 {
		return fmt.Errorf("--idle_stop must be >= 0, --drain_timeout and --progress positive, got %v, %v and %v", k.idleStop, l.drainTimeout, l.progress)
	}
	if k.watch < 0 || k.inFlight < 0 {
		return fmt.Errorf("--watch_partitions and --max_in_flight must be >= 0, got %v and %d", k.watch, k.inFlight)
	}
	return nil
}

// kafkaRun runs seed 001's pipeline (pipelines/kafka) against a Kafka
// topic until stopped or, with --idle_stop, until it has read everything.
var kafkaRun = pipelineRun{
	untilStopped: true,
	check:        checkKafka,
	prepare: func(o *options) error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := createTable(ctx, o); err != nil || !o.kafka.produce {
			return err
		}
		return produceOrders(ctx, o)
	},
	describe: func(o *options) string {
		return fmt.Sprintf("kafka from %s on %s", o.kafka.inputTopic, o.kafka.brokers)
	},
	checkRunner: followedOnly("--pipeline=kafka runs on a Beam job server (prism, universal, flink, spark), which it stops itself on Ctrl-C"),
	build: func(s beam.Scope, o *options) error {
		src, cfg := kafkaConfig(o)
		_, err := streaming.Build(s, src, cfg.Config)
		return err
	},
	run: func(ctx context.Context, o *options, job jobrun.Options, stderr io.Writer) (report, error) {
		k, l := &o.kafka, &o.live
		until := "until stopped; Ctrl-C stops it (what was read is written and committed first; a second Ctrl-C kills)"
		if k.idleStop > 0 {
			until = fmt.Sprintf("until every partition is read to its end and idle for %v, or stopped", k.idleStop)
		}
		fmt.Fprintf(stderr, "runjob: reading %s on %s, group %s, %s\n", k.inputTopic, k.brokers, k.group, until)
		src, cfg := kafkaConfig(o)
		if err := resumeOnFlink(ctx, o, &job, &cfg, stderr); err != nil {
			return nil, err
		}
		res, err := untilStopped(ctx, job, src, cfg, stderr, "no more reads")
		if err != nil {
			return nil, err
		}
		return func(stdout, stderr io.Writer, _ time.Duration) int {
			c := res.Dedup
			fmt.Fprintf(stdout, "pipeline            kafka on %s\n", runnerNote(o.runner))
			fmt.Fprintf(stdout, "input               %s on %s (%d partitions), group %s", k.inputTopic, k.brokers, res.Readers, k.group)
			if k.produce {
				fmt.Fprintf(stdout, "; %d records written for %d orders (--produce)", k.produced, o.distinctRows)
			}
			fmt.Fprintln(stdout)
			fmt.Fprintf(stdout, "records read        %d, %d safe\n", res.Read, res.Settled)
			fmt.Fprintf(stdout, "rows in             %d\n", c.RowsIn)
			fmt.Fprintf(stdout, "emitted             %d\n", c.Emitted)
			fmt.Fprintf(stdout, "duplicates dropped  %d\n", c.DuplicatesDropped)
			if c.LateDropped > 0 {
				fmt.Fprintf(stdout, "late dropped        %d\n", c.LateDropped)
			}
			fmt.Fprintf(stdout, "dead-lettered       %d\n", res.DeadLettered+c.DeadLettered)
			fmt.Fprintf(stdout, "written             %d (%s and %s)\n", res.Written, l.outputTopic, l.deadLetterTopic)
			postgresLine(stdout, o, res)
			fmt.Fprintf(stdout, "committed           %s\n", committedLine(res.Committed, res.End))
			fmt.Fprintf(stdout, "every record        %d = %d emitted + %d duplicates dropped + %d late + %d dead-lettered\n",
				res.Read, c.Emitted, c.DuplicatesDropped, c.LateDropped, res.DeadLettered+c.DeadLettered)
			how := "idle, every partition read to its end"
			if res.Stopped {
				how = "stopped, drained"
			}
			if res.Savepoint != "" {
				how = strings.Replace(how, ", drained", "", 1) + ", with the savepoint " + res.Savepoint
			}
			fmt.Fprintf(stdout, "wall time           %v (%s)\n", res.Elapsed.Round(time.Millisecond), how)
			if c.Emitted+c.DuplicatesDropped+c.LateDropped+res.DeadLettered+c.DeadLettered != res.Read {
				fmt.Fprintln(stderr, "runjob: the kafka run did not account for every record it read")
				return 1
			}
			return 0
		}, nil
	},
}

// committedLine says, per partition, the group's offset against the end.
func committedLine(committed, end map[int32]int64) string {
	var parts []string
	for _, p := range slices.Sorted(maps.Keys(end)) {
		parts = append(parts, fmt.Sprintf("partition %d at %d of %d", p, committed[p], end[p]))
	}
	return strings.Join(parts, ", ")
}

// kafkaConfig is the pipeline of a run.
func kafkaConfig(o *options) (streaming.Kafka, streaming.RunConfig) {
	k, l := &o.kafka, &o.live
	src := streaming.Kafka{
		Brokers: k.brokers, InputTopic: k.inputTopic, OutputTopic: l.outputTopic, DeadLetterTopic: l.deadLetterTopic,
		Group: k.group,
		Read:  []kafkaio.Option{kafkaio.MaxInFlight(k.inFlight)},
	}
	cfg := streaming.RunConfig{
		Config: streaming.Config{
			PartitionBy: partitionBy(o),
			OnTime:      o.onTime,
			Dedup:       dedupOptions(withoutColumns(o)),
			Postgres:    o.postgres,
		},
		IdleStop:      k.idleStop,
		DrainTimeout:  l.drainTimeout,
		ProgressEvery: l.progress,
	}
	if k.idleStop > 0 && !o.set["state_ttl"] {
		// A run that ends by itself: Prism keeps a job with pending
		// processing-time cleanup timers alive until they fire.
		cfg.Dedup = append(cfg.Dedup, dedup.CleanupTimers(false))
	}
	if k.watch > 0 {
		src.Read = append(src.Read, kafkaio.WatchPartitions(k.watch))
	}
	if k.txnID != "" {
		src.Write = append(src.Write, kafkaio.Transactional(k.txnID))
	}
	return src, cfg
}

// withoutColumns is o without the flags that name columns: the Kafka
// pipeline keys the records (--partition_by) and stamps them with their
// event time (--on_time) itself, and KeepFirst takes the rest.
func withoutColumns(o *options) *options {
	c := withoutPartitionBy(o)
	delete(c.set, "on_time")
	return c
}

// produceOrders writes --count generated orders (with their duplicates)
// and 3 undecodable values to the input topic, creating the topics that
// are missing.
func produceOrders(ctx context.Context, o *options) error {
	k, l := &o.kafka, &o.live
	if err := streaming.CreateTopics(ctx, k.brokers, 2, k.inputTopic, l.outputTopic, l.deadLetterTopic); err != nil {
		return err
	}
	rows := orders.Generate(o.count, o.seed)
	undecodable := []string{"not json", `{"order_id": ""}`, `{"price": 3}`}
	if err := streaming.ProduceOrders(ctx, k.brokers, k.inputTopic, rows, undecodable...); err != nil {
		return err
	}
	k.produced = len(rows) + len(undecodable)
	o.distinctRows = o.count
	return nil
}

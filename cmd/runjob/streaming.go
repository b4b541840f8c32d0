package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamdedup/beamdedup/internal/jobrun"
	"github.com/beamdedup/beamdedup/internal/pubsubadmin"
	"github.com/beamdedup/beamdedup/internal/pubsubdemo"
	"github.com/beamdedup/beamdedup/pipelines/streaming"
	"github.com/beamdedup/beamdedup/transforms/pubsubio"
)

// liveOptions are the flags of --pipeline=streaming against a real
// subscription (or an emulator) instead of the demo's fake.
type liveOptions struct {
	subscription    string
	outputTopic     string
	deadLetterTopic string
	readers         int
	ackDeadline     time.Duration
	drainTimeout    time.Duration
	progress        time.Duration
	fake            string // the demo's Pub/Sub fake, a built pstestserver
}

func addLiveFlags(fs *flag.FlagSet, l *liveOptions) {
	fs.StringVar(&l.subscription, "subscription", "", "streaming: read this Pub/Sub subscription, projects/P/subscriptions/S, until stopped (Ctrl-C or SIGTERM, or --timeout when given: drains and exits); with PUBSUB_EMULATOR_HOST set, on that emulator. Without it --pipeline=streaming runs the demo")
	fs.StringVar(&l.outputTopic, "output_topic", "", "streaming: publish one message per key to this topic, projects/P/topics/T; kafka: write one record per key to this topic (default "+defaultOutputTopic+")")
	fs.StringVar(&l.deadLetterTopic, "dead_letter_topic", "", "streaming: publish undecodable messages here, with the reason in attribute dlq_reason, projects/P/topics/T; kafka: write undecodable records here, with the reason in header dlq_reason (default "+defaultDeadLetterTopic+")")
	fs.IntVar(&l.readers, "readers", 1, "streaming: concurrent readers of the subscription")
	fs.DurationVar(&l.ackDeadline, "ack_deadline", time.Minute, "streaming: lease kept on each message pulled, renewed until the message is acked once its row is out (1s to 600s)")
	fs.DurationVar(&l.drainTimeout, "drain_timeout", streaming.DefaultDrainTimeout, "streaming, kafka: after Ctrl-C, how long to wait for what was read to be published and acked (committed) before giving up")
	fs.DurationVar(&l.progress, "progress", streaming.DefaultProgressEvery, "streaming, kafka: print the job's counters this often")
	fs.StringVar(&l.fake, "pubsub_fake", "", "streaming demo: the Pub/Sub fake to start, a built testing/pubsubtest/cmd/pstestserver (default: go run it from this module's source)")
}

// checkStreaming rejects an incomplete or malformed set of Pub/Sub names
// for a run against a subscription.
func checkStreaming(o *options) error {
	l := &o.live
	if mode(o) != streamingLive {
		return nil
	}
	var missing []string
	for _, f := range []string{"subscription", "output_topic", "dead_letter_topic"} {
		if !o.set[f] {
			missing = append(missing, "--"+f)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("--pipeline=streaming against Pub/Sub needs --subscription, --output_topic and --dead_letter_topic; missing %s", strings.Join(missing, ", "))
	}
	if err := checkPubsubName("subscription", l.subscription, "subscriptions"); err != nil {
		return err
	}
	for _, f := range []struct{ flag, name string }{{"output_topic", l.outputTopic}, {"dead_letter_topic", l.deadLetterTopic}} {
		if err := checkPubsubName(f.flag, f.name, "topics"); err != nil {
			return err
		}
	}
	if l.outputTopic == l.deadLetterTopic {
		return fmt.Errorf("--output_topic and --dead_letter_topic are both %s; dead letters need a topic of their own", l.outputTopic)
	}
	if l.readers <= 0 {
		return fmt.Errorf("--readers=%d: want at least 1", l.readers)
	}
	if l.ackDeadline < time.Second || l.ackDeadline > 600*time.Second {
		return fmt.Errorf("--ack_deadline=%v: want 1s to 600s", l.ackDeadline)
	}
	if l.drainTimeout <= 0 || l.progress <= 0 {
		return fmt.Errorf("--drain_timeout and --progress must be positive, got %v and %v", l.drainTimeout, l.progress)
	}
	return nil
}

// checkPubsubName explains a name that is not projects/P/<kind>/N (and
// the common slip of giving the other kind), naming the flag.
func checkPubsubName(flag, name, kind string) error {
	if name == "" {
		return fmt.Errorf("--%s is empty; want projects/PROJECT/%s/NAME", flag, kind)
	}
	if err := pubsubadmin.CheckName(name, kind); err != nil {
		return fmt.Errorf("--%s=%v", flag, err)
	}
	return nil
}

// demoRun runs the Pub/Sub streaming demo (demo.go): the pipeline against
// a Pub/Sub fake in a process of its own, playing a stream with
// duplicates, retries and lost acks.
var demoRun = pipelineRun{
	describe: func(o *options) string { return "streaming demo on " + o.runner },
	run: func(ctx context.Context, o *options, job jobrun.Options, _ io.Writer) (report, error) {
		cfg := demoConfig{Script: pubsubdemo.Script{Keys: o.count, Seed: o.seed}, StateTTL: o.stateTTL}
		if o.runner == "flink" || o.runner == "spark" {
			// The kept rows come out only once the source has ended there
			// (docs/streaming.md): a lost ack is not read again in the run.
			cfg.LostAckEvery = -1
		}
		if o.live.fake != "" {
			cfg.Fake = []string{o.live.fake}
		}
		res, err := runDemo(ctx, job, cfg)
		if err != nil {
			return nil, err
		}
		return func(stdout, stderr io.Writer, _ time.Duration) int {
			fmt.Fprintf(stdout, "pipeline            streaming on %s\n%s\n", runnerNote(o.runner), res)
			if !res.OK() {
				fmt.Fprintln(stderr, "runjob: the streaming demo did not emit exactly one message per order")
				return 1
			}
			return 0
		}, nil
	},
}

// liveRun runs the streaming pipeline against a subscription until ctx is
// done (Ctrl-C, SIGTERM, or --timeout when given), then drains and exits.
var liveRun = pipelineRun{
	untilStopped: true,
	prepare: func(o *options) error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return createTable(ctx, o)
	},
	describe:    func(o *options) string { return "streaming from " + o.live.subscription },
	checkRunner: followedOnly("--pipeline=streaming with --subscription runs on a Beam job server (prism, universal, flink, spark), which it stops itself on Ctrl-C; on Dataflow build the pipeline with pipelines/streaming and drain the job with Dataflow (see docs/streaming-pubsub.md)"),
	build: func(s beam.Scope, o *options) error {
		src, cfg := liveConfig(o)
		_, err := streaming.Build(s, src, cfg.Config)
		return err
	},
	run: func(ctx context.Context, o *options, job jobrun.Options, stderr io.Writer) (report, error) {
		l := &o.live
		target := pubsubadmin.Target("")
		fmt.Fprintf(stderr, "runjob: reading %s on %s until stopped; Ctrl-C stops it (what was read is published and acked first; a second Ctrl-C kills)\n", l.subscription, target)
		src, cfg := liveConfig(o)
		res, err := untilStopped(ctx, job, src, cfg, stderr, "no more pulls")
		if err != nil {
			return nil, err
		}
		return func(stdout, _ io.Writer, _ time.Duration) int {
			c := res.Dedup
			fmt.Fprintf(stdout, "pipeline            streaming on %s\n", runnerNote(o.runner))
			fmt.Fprintf(stdout, "subscription        %s on %s\n", l.subscription, target)
			fmt.Fprintf(stdout, "messages read       %d (redeliveries included), %d acked\n", res.Read, res.Settled)
			fmt.Fprintf(stdout, "rows in             %d\n", c.RowsIn)
			fmt.Fprintf(stdout, "emitted             %d\n", c.Emitted)
			fmt.Fprintf(stdout, "duplicates dropped  %d\n", c.DuplicatesDropped)
			fmt.Fprintf(stdout, "dead-lettered       %d\n", res.DeadLettered)
			fmt.Fprintf(stdout, "published           %d (%s and %s)\n", res.Written, l.outputTopic, l.deadLetterTopic)
			postgresLine(stdout, o, res)
			fmt.Fprintf(stdout, "wall time           %v (stopped, drained)\n", res.Elapsed.Round(time.Millisecond))
			return 0
		}, nil
	},
}

// liveConfig is the pipeline of a run against a subscription. The emulator
// of PUBSUB_EMULATOR_HOST, when set, is named in the pipeline, so that SDK
// workers in other processes (a worker pool) use it too.
func liveConfig(o *options) (streaming.PubSub, streaming.RunConfig) {
	l := &o.live
	src := streaming.PubSub{
		Subscription:    l.subscription,
		OutputTopic:     l.outputTopic,
		DeadLetterTopic: l.deadLetterTopic,
		Endpoint:        os.Getenv("PUBSUB_EMULATOR_HOST"),
		Readers:         l.readers,
		Read:            []pubsubio.Option{pubsubio.AckDeadline(l.ackDeadline)},
	}
	cfg := streaming.RunConfig{
		Config: streaming.Config{
			PartitionBy: partitionBy(o),
			Dedup:       dedupOptions(withoutPartitionBy(o)), // after the pipeline's default StateTTL (10m)
			Postgres:    o.postgres,
		},
		DrainTimeout:  l.drainTimeout,
		ProgressEvery: l.progress,
	}
	return src, cfg
}

// partitionBy is --partition_by's columns (none, for the pipeline's
// default order_id, when not given).
func partitionBy(o *options) []string {
	if !o.set["partition_by"] {
		return nil
	}
	return columns(o.partitionBy)
}

// untilStopped runs a streaming pipeline until ctx is done or the run ends
// by itself, printing its progress and, when ctx is done first, that it
// stops (stopping: what it no longer does) on stderr.
func untilStopped[E any](ctx context.Context, job jobrun.Options, src streaming.Source[E], cfg streaming.RunConfig, stderr io.Writer, stopping string) (streaming.Result, error) {
	stderr = &lockedWriter{w: stderr} // progress and the stop notice come from two goroutines
	cfg.Progress = func(s streaming.Status) { fmt.Fprintf(stderr, "runjob: %v\n", s) }
	finished := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			if cfg.Savepoints != "" {
				fmt.Fprintf(stderr, "runjob: stopping with a savepoint into %s (at most --drain_timeout=%v)\n", cfg.Savepoints, cfg.DrainTimeout)
			} else {
				fmt.Fprintf(stderr, "runjob: stopping: %s; draining what was read (at most --drain_timeout=%v)\n", stopping, cfg.DrainTimeout)
			}
		case <-finished:
		}
	}()
	res, err := streaming.Run(ctx, job, src, cfg)
	close(finished)
	return res, err
}

// followedOnly is the checkRunner of a run that stops itself on Ctrl-C,
// which needs a job server: msg says so.
func followedOnly(msg string) func(o *options) error {
	return func(o *options) error {
		if !jobrun.Followed(o.runner) {
			return errors.New(msg)
		}
		return nil
	}
}

// createTable creates the kept orders' table in --postgres, when given.
func createTable(ctx context.Context, o *options) error {
	if o.postgres == "" {
		return nil
	}
	return streaming.CreateTable(ctx, o.postgres, streaming.DefaultTable)
}

// postgresLine is the summary's line of the kept orders' table, when
// there is one.
func postgresLine(stdout io.Writer, o *options, res streaming.Result) {
	if o.postgres != "" {
		fmt.Fprintf(stdout, "postgres            %d rows written (or there already), %d refused and dead-lettered, into table %s\n",
			res.PostgresWritten, res.PostgresRefused, streaming.DefaultTable)
	}
}

// withoutPartitionBy is o without --partition_by: the streaming pipeline
// keys the messages itself (Config.PartitionBy), and KeepFirst takes the
// rest of the dedup flags.
func withoutPartitionBy(o *options) *options {
	c := *o
	c.set = maps.Clone(o.set)
	delete(c.set, "partition_by")
	return &c
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"

	"github.com/beamdedup/beamdedup/pipelines/streaming"
	"github.com/beamdedup/beamdedup/transforms/pubsubio"
)

// liveOptions are the flags of --pipeline=streaming against a real
// subscription (or an emulator) instead of the demo's in-process fake.
type liveOptions struct {
	subscription    string
	outputTopic     string
	deadLetterTopic string
	readers         int
	ackDeadline     time.Duration
	drainTimeout    time.Duration
	progress        time.Duration
	stallLimit      time.Duration // demo and live
}

// stallLimit is --stall_limit as streaming's StallLimit (0: no watchdog).
func (l *liveOptions) stallLimitConfig() time.Duration {
	if l.stallLimit == 0 {
		return -1
	}
	return l.stallLimit
}

var liveFlags = []string{"subscription", "output_topic", "dead_letter_topic", "readers", "ack_deadline", "drain_timeout", "progress"}

func addLiveFlags(fs *flag.FlagSet, l *liveOptions) {
	fs.StringVar(&l.subscription, "subscription", "", "streaming: read this Pub/Sub subscription, projects/P/subscriptions/S, until stopped (Ctrl-C or SIGTERM, or --timeout when given: drains and exits); with PUBSUB_EMULATOR_HOST set, on that emulator. Without it --pipeline=streaming runs the demo")
	fs.StringVar(&l.outputTopic, "output_topic", "", "streaming: publish one message per key to this topic, projects/P/topics/T")
	fs.StringVar(&l.deadLetterTopic, "dead_letter_topic", "", "streaming: publish undecodable messages here, with the reason in attribute dlq_reason, projects/P/topics/T")
	fs.IntVar(&l.readers, "readers", 1, "streaming: concurrent readers of the subscription")
	fs.DurationVar(&l.ackDeadline, "ack_deadline", pubsubio.DefaultAckDeadline, "streaming: lease the source keeps on each message it pulled until it acks it (1s to 600s)")
	fs.DurationVar(&l.drainTimeout, "drain_timeout", streaming.DefaultDrainTimeout, "streaming: after Ctrl-C, how long to wait for what was read to be published before giving up")
	fs.DurationVar(&l.progress, "progress", streaming.DefaultProgressEvery, "streaming: print the job's counters this often")
	fs.DurationVar(&l.stallLimit, "stall_limit", streaming.DefaultStallLimit, "streaming (demo and --subscription): when a step of the job holds work and finishes none of it for this long, cancel the job and exit 1 saying what stalled; an idle subscription is never a stall; 0 = no watchdog")
}

// on reports whether --pipeline=streaming runs against a subscription.
func (l *liveOptions) on(o *options) bool {
	return o.pipeline == "streaming" && (o.set["subscription"] || o.set["output_topic"] || o.set["dead_letter_topic"])
}

// checkStreaming rejects flags that do not apply to the streaming demo or
// to a live run, and malformed Pub/Sub names.
func checkStreaming(o *options) error {
	l := &o.live
	if l.stallLimit < 0 {
		return fmt.Errorf("--stall_limit=%v: want a positive duration, or 0 for no watchdog", l.stallLimit)
	}
	if !l.on(o) {
		for _, f := range append([]string{"input", "output", "errors", "partition_by", "on_time", "event_time_ttl", "uid", "force_stateful", "graph"}, liveFlags...) {
			if o.set[f] {
				return fmt.Errorf("--%s does not apply to --pipeline=streaming: the demo publishes its own stream to an in-process Pub/Sub fake (give --subscription, --output_topic and --dead_letter_topic to read a real one)", f)
			}
		}
		return nil
	}
	for _, f := range []string{"input", "output", "errors", "on_time", "force_stateful", "graph", "count", "seed"} {
		if o.set[f] {
			return fmt.Errorf("--%s does not apply to --pipeline=streaming with --subscription", f)
		}
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
	if err := checkPubsubName("subscription", l.subscription, "subscriptions", "topics"); err != nil {
		return err
	}
	for _, f := range []struct{ flag, name string }{{"output_topic", l.outputTopic}, {"dead_letter_topic", l.deadLetterTopic}} {
		if err := checkPubsubName(f.flag, f.name, "topics", "subscriptions"); err != nil {
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

// checkPubsubName explains a name that is not projects/P/<kind>/N, and the
// common slip of giving the other kind.
func checkPubsubName(flag, name, kind, other string) error {
	if name == "" {
		return fmt.Errorf("--%s is empty; want projects/PROJECT/%s/NAME", flag, kind)
	}
	err := pubsubio.CheckSubscriptionName(name)
	if kind == "topics" {
		err = pubsubio.CheckTopicName(name)
	}
	if err == nil {
		return nil
	}
	hint := ""
	if strings.Contains(name, "/"+other+"/") {
		hint = fmt.Sprintf(" (that names a %s)", other[:len(other)-1])
	}
	return fmt.Errorf("--%s=%q is not a full %s name%s; want projects/PROJECT/%s/NAME", flag, name, kind[:len(kind)-1], hint, kind)
}

// runLive runs the streaming pipeline against a subscription until ctx is
// done (Ctrl-C, SIGTERM, or --timeout when given), then drains and exits.
func runLive(ctx context.Context, o *options, stdout, stderr io.Writer) int {
	if o.runner != "prism" || *jobopts.Endpoint != "" {
		fmt.Fprintf(stderr, "runjob: --pipeline=streaming with --subscription runs on Prism in this process (it stops the job itself on Ctrl-C); for Flink or Dataflow build the pipeline with pipelines/streaming and stop the job with the runner (see docs/streaming-pubsub.md)\n")
		return 2
	}
	l := &o.live
	stderr = &lockedWriter{w: stderr} // progress and the stop notice come from two goroutines
	cfg := streaming.LiveConfig{
		Config: streaming.Config{
			Subscription:    l.subscription,
			OutputTopic:     l.outputTopic,
			DeadLetterTopic: l.deadLetterTopic,
			Read:            []pubsubio.ReadOption{pubsubio.AckDeadline(l.ackDeadline)},
			Dedup:           dedupOptions(o), // after Config's defaults (StateTTL 10m, order_id)
			StallLimit:      l.stallLimitConfig(),
		},
		Readers:       l.readers,
		DrainTimeout:  l.drainTimeout,
		ProgressEvery: l.progress,
		Progress: func(s streaming.LiveStatus) {
			fmt.Fprintf(stderr, "runjob: %v\n", s)
		},
	}
	if o.set["timeout"] && o.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	target := pubsubio.Target("")
	fmt.Fprintf(stderr, "runjob: reading %s on %s until stopped; Ctrl-C stops it (what was read is published and acked first; a second Ctrl-C kills)\n", l.subscription, target)
	finished := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			fmt.Fprintf(stderr, "runjob: stopping: no more pulls; draining what was read (at most --drain_timeout=%v)\n", l.drainTimeout)
		case <-finished:
		}
	}()
	start := time.Now()
	res, err := streaming.RunLive(ctx, cfg)
	close(finished)
	if err != nil {
		fmt.Fprintf(stderr, "runjob: streaming from %s failed after %v: %s\n", l.subscription, time.Since(start).Round(time.Millisecond), oneLine(err))
		return 1
	}
	c := res.Dedup
	fmt.Fprintf(stdout, "pipeline            streaming on %s\n", runnerNote(o.runner))
	fmt.Fprintf(stdout, "subscription        %s on %s\n", l.subscription, target)
	fmt.Fprintf(stdout, "messages read       %d (redeliveries included), %d acked\n", res.Read, res.Acked)
	fmt.Fprintf(stdout, "rows in             %d\n", c.RowsIn)
	fmt.Fprintf(stdout, "emitted             %d\n", c.Emitted)
	fmt.Fprintf(stdout, "duplicates dropped  %d\n", c.DuplicatesDropped)
	fmt.Fprintf(stdout, "dead-lettered       %d\n", res.DeadLettered)
	fmt.Fprintf(stdout, "published           %d (%s and %s)\n", res.Published, l.outputTopic, l.deadLetterTopic)
	fmt.Fprintf(stdout, "wall time           %v (stopped, drained)\n", res.Elapsed.Round(time.Millisecond))
	return 0
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

// Package streaming is the Pub/Sub deduplication pipeline: read messages
// from a subscription, decode their JSON payloads into rows (the orders rows
// by default), keep the first row per key with dedup.KeepFirst and a TTL, and
// publish each kept row as JSON to an output topic. Messages that cannot be
// decoded go to a dead-letter topic with the reason in the "dlq_reason"
// attribute.
//
// Pub/Sub delivers at least once: messages are redelivered when an ack is
// late or lost, and publishers retry (same payload, new message id). The
// source acks a message only after the runner committed the bundle that read
// it, so nothing is lost; KeepFirst absorbs what comes twice, so the output
// has one message per key while the key's state lives (StateTTL).
//
// Dead-lettering happens in the source's fused bundle, before the bundle
// commits, so an undecodable message is acked only once it has been
// published to the dead-letter topic.
//
// On Dataflow (Config.Native) the pipeline uses Beam's io/pubsubio, which
// Dataflow executes natively; elsewhere (Prism, Flink) the Go-native source
// of transforms/pubsubio. Both produce pubsubio.Message, so the rest of the
// pipeline is shared. Run and RunLive run it as a job with
// pipelines/jobrun; the package streaming/demo runs it against an
// in-process Pub/Sub fake.
package streaming

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beamdedup/beamdedup/pipelines/jobrun"
	"github.com/beamdedup/beamdedup/pipelines/orders"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/pubsubio"
)

func init() {
	Register[orders.Order]()
}

// Attributes set on dead-lettered messages.
const (
	AttrReason       = "dlq_reason"
	AttrMessageID    = "dlq_message_id"
	AttrSubscription = "dlq_subscription"
)

// Defaults of Config.
const (
	// DefaultStateTTL is how long KeepFirst remembers a key (processing
	// time) unless Config.Dedup says otherwise.
	DefaultStateTTL = 10 * time.Minute
	DefaultUID      = "streaming-dedup"
)

var deadLettered = beam.NewCounter("streaming", "dead_lettered")

// Config configures Build. Subscription and OutputTopic are full names
// (projects/P/subscriptions/S, projects/P/topics/T).
type Config struct {
	Subscription string
	OutputTopic  string
	// DeadLetterTopic receives undecodable messages. Empty: they are
	// counted, logged by the counter streaming/dead_lettered, and dropped.
	DeadLetterTopic string

	// PartitionBy names the key columns of the row type (beam tags). Build
	// defaults to "order_id"; ignored when ByMessageID.
	PartitionBy []string
	// ByMessageID deduplicates by pubsubio.Message.ID: the IDAttribute's
	// value when set (publisher retries then share a key), else Pub/Sub's
	// message id (which only absorbs redeliveries).
	ByMessageID bool
	// UID names the KeepFirst step and its state (default "streaming-dedup").
	UID string

	// Native uses Beam's io/pubsubio (Dataflow only).
	Native bool
	// Endpoint is an emulator host:port for the Go-native source and sink.
	Endpoint           string
	IDAttribute        string
	TimestampAttribute string
	// Read adds options of the Go-native source (IdleStop, Readers, ...).
	Read []pubsubio.ReadOption
	// Dedup adds KeepFirst options after the pipeline's own:
	// dedup.StateTTL(DefaultStateTTL), the UID and the key. A
	// dedup.StateTTL here replaces the default, with dedup's meaning (0
	// keeps keys forever); duplicates further apart than the TTL are
	// emitted again.
	//
	// On an unbounded input KeepFirst deletes expired keys with
	// processing-time timers, and Prism keeps a job alive until its pending
	// timers fire: after an IdleStop the job lingers up to the TTL. Finite
	// runs (demos, tests) add dedup.CleanupTimers(false), or keep keys
	// forever with dedup.StateTTL(0).
	Dedup []dedup.Option

	// fusedSink drops the Reshuffle before the publish: only the
	// reproduction of the Prism stall uses it.
	fusedSink bool
}

// Outputs are the pipeline's collections.
type Outputs struct {
	Messages    beam.PCollection // pubsubio.Message as read
	Kept        beam.PCollection // rows after KeepFirst (the row type)
	Published   beam.PCollection // pubsubio.Message sent to OutputTopic
	DeadLetters beam.PCollection // pubsubio.Message sent to DeadLetterTopic
}

// Build adds the pipeline for the orders rows (pipelines/orders.Order) to s.
func Build(s beam.Scope, cfg Config) (Outputs, error) {
	if len(cfg.PartitionBy) == 0 {
		cfg.PartitionBy = []string{"order_id"}
	}
	return BuildFor[orders.Order](s, cfg)
}

// BuildFor is Build for row type T, a struct decoded from the payload with
// encoding/json. Call Register[T] in an init function first. If *T has a
// method Validate() error, a row it rejects is dead-lettered too.
func BuildFor[T any](s beam.Scope, cfg Config) (Outputs, error) {
	if cfg.Subscription == "" || cfg.OutputTopic == "" {
		return Outputs{}, errors.New("streaming: Subscription and OutputTopic are required")
	}
	if !cfg.ByMessageID && len(cfg.PartitionBy) == 0 {
		return Outputs{}, errors.New("streaming: set PartitionBy (row columns) or ByMessageID")
	}
	if cfg.UID == "" {
		cfg.UID = DefaultUID
	}
	s = s.Scope("streaming")

	var out Outputs
	var err error
	readOpts := append([]pubsubio.ReadOption{}, cfg.Read...)
	if cfg.IDAttribute != "" {
		readOpts = append(readOpts, pubsubio.IDAttribute(cfg.IDAttribute))
	}
	if cfg.TimestampAttribute != "" {
		readOpts = append(readOpts, pubsubio.TimestampAttribute(cfg.TimestampAttribute))
	}
	if cfg.Native {
		out.Messages, err = pubsubio.ReadNative(s, cfg.Subscription, readOpts...)
	} else {
		if cfg.Endpoint != "" {
			readOpts = append(readOpts, pubsubio.Endpoint(cfg.Endpoint))
		}
		out.Messages, err = pubsubio.TryRead(s, cfg.Subscription, readOpts...)
	}
	if err != nil {
		return Outputs{}, err
	}

	dopts := []dedup.Option{dedup.StateTTL(DefaultStateTTL), dedup.UID(cfg.UID)}
	if cfg.ByMessageID {
		dopts = append(dopts, dedup.PartitionBy("id"))
	} else {
		dopts = append(dopts, dedup.PartitionBy(cfg.PartitionBy...))
	}
	dopts = append(dopts, cfg.Dedup...)

	// Decode (and dead-letter) first, in the source's fused bundle.
	df := &decodeFn[T]{Subscription: cfg.Subscription}
	if cfg.ByMessageID {
		good, bad := beam.ParDo2(s, &checkFn[T]{Subscription: cfg.Subscription}, out.Messages)
		out.DeadLetters = bad
		r, err := dedup.TryKeepFirst(s, good, dopts...)
		kept := r.Rows
		if err != nil {
			return Outputs{}, err
		}
		out.Kept = beam.ParDo(s, &rowFn[T]{}, kept)
	} else {
		rows, bad := beam.ParDo2(s, df, out.Messages)
		out.DeadLetters = bad
		r, err := dedup.TryKeepFirst(s, rows, dopts...)
		out.Kept = r.Rows
		if err != nil {
			return Outputs{}, err
		}
	}
	// The Reshuffle keeps KeepFirst's stage from being the last of its
	// fused chain: on Prism a stage with no output and no timers busy-waits
	// in every running bundle, and 8 such bundles starve the state round
	// trips until the job stalls (notes/beam-defects.md, "A streaming job
	// stalls"). The publish stage after it has short bundles.
	kept := out.Kept
	if !cfg.fusedSink {
		kept = beam.Reshuffle(s, kept)
	}
	out.Published = beam.ParDo(s, &encodeFn[T]{}, kept)

	write := func(topic string, col beam.PCollection) error {
		if cfg.Native {
			return pubsubio.WriteNative(s, topic, col)
		}
		var wopts []pubsubio.WriteOption
		if cfg.Endpoint != "" {
			wopts = append(wopts, pubsubio.WriteEndpoint(cfg.Endpoint))
		}
		return pubsubio.TryWrite(s, topic, col, wopts...)
	}
	if err := write(cfg.OutputTopic, out.Published); err != nil {
		return Outputs{}, err
	}
	if cfg.DeadLetterTopic != "" {
		if err := write(cfg.DeadLetterTopic, out.DeadLetters); err != nil {
			return Outputs{}, err
		}
	}
	return out, nil
}

// Register registers the DoFns of the pipeline for row type T; call it from
// an init function of the package that defines T (orders.Order is
// registered here).
func Register[T any]() {
	beam.RegisterType(reflect.TypeFor[T]())
	register.DoFn4x0[context.Context, pubsubio.Message, func(T), func(pubsubio.Message)](&decodeFn[T]{})
	register.DoFn4x0[context.Context, pubsubio.Message, func(pubsubio.Message), func(pubsubio.Message)](&checkFn[T]{})
	register.DoFn1x1[pubsubio.Message, T](&rowFn[T]{})
	register.DoFn1x1[T, pubsubio.Message](&encodeFn[T]{})
	register.Emitter1[T]()
	register.Emitter1[pubsubio.Message]()
}

type validator interface{ Validate() error }

// decode parses a payload into a T; the error is the dead-letter reason.
func decode[T any](data []byte) (T, error) {
	var row T
	if err := json.Unmarshal(data, &row); err != nil {
		return row, fmt.Errorf("invalid JSON: %v", err)
	}
	if v, ok := any(&row).(validator); ok {
		if err := v.Validate(); err != nil {
			return row, fmt.Errorf("invalid row: %v", err)
		}
	}
	return row, nil
}

// decodeFn turns payloads into rows; what does not decode goes out as a
// dead letter carrying the original payload and attributes plus the reason.
type decodeFn[T any] struct {
	Subscription string
}

func (f *decodeFn[T]) ProcessElement(ctx context.Context, m pubsubio.Message, rows func(T), dead func(pubsubio.Message)) {
	row, err := decode[T](m.Data)
	if err != nil {
		dead(deadLetter(m, err, f.Subscription))
		deadLettered.Inc(ctx, 1)
		return
	}
	rows(row)
}

func deadLetter(m pubsubio.Message, reason error, subscription string) pubsubio.Message {
	attrs := make(map[string]string, len(m.Attributes)+3)
	for k, v := range m.Attributes {
		attrs[k] = v
	}
	attrs[AttrReason] = reason.Error()
	attrs[AttrMessageID] = m.MessageID
	attrs[AttrSubscription] = subscription
	return pubsubio.Message{Data: m.Data, Attributes: attrs, OrderingKey: m.OrderingKey}
}

// checkFn is decodeFn for deduplication by message id: it passes the
// message itself on, and the row is decoded again after KeepFirst.
type checkFn[T any] struct {
	Subscription string
}

func (f *checkFn[T]) ProcessElement(ctx context.Context, m pubsubio.Message, good func(pubsubio.Message), dead func(pubsubio.Message)) {
	if _, err := decode[T](m.Data); err != nil {
		dead(deadLetter(m, err, f.Subscription))
		deadLettered.Inc(ctx, 1)
		return
	}
	good(m)
}

type rowFn[T any] struct{}

// ProcessElement decodes a message checkFn has already accepted.
func (*rowFn[T]) ProcessElement(m pubsubio.Message) T {
	row, _ := decode[T](m.Data)
	return row
}

type encodeFn[T any] struct{}

func (*encodeFn[T]) ProcessElement(row T) pubsubio.Message {
	data, err := json.Marshal(row)
	if err != nil { // a struct of JSON-decoded values always encodes
		data = []byte(fmt.Sprintf("%q", err.Error()))
	}
	return pubsubio.Message{Data: data}
}

// Run builds the pipeline for the orders rows and runs it as a job until it
// ends (IdleStop on Prism; savepoint/cancel on Flink; drain on Dataflow),
// returning KeepFirst's counters. beam.Init must have been called.
//
// On Prism and other portable runners the job is watched (Watched): when
// the source has read messages it has not acked and no counter moves for
// job.StallLimit, the job is cancelled and Run returns a *jobrun.Stall
// that says so.
func Run(ctx context.Context, job jobrun.Options, cfg Config) (dedup.Counters, error) {
	p, s := beam.NewPipelineWithRoot()
	if _, err := Build(s, cfg); err != nil {
		return dedup.Counters{}, err
	}
	pr, err := jobrun.Run(ctx, p, Watched(job, nil))
	if err != nil {
		return dedup.Counters{}, fmt.Errorf("streaming: %w", err)
	}
	return dedup.ReadCounters(pr), nil
}

// stallHint ends a stall message once the job's workers have reported:
// where the known cause is written down.
const stallHint = "unless a step of yours blocks, this is a known Prism defect, see notes/beam-defects.md (entry 8, \"A streaming job stalls\") and docs/streaming-reliability.md"

// Watched returns job set up to watch a run of the pipeline that ends by
// itself (IdleStop): progress is any job counter moving, and the job holds
// work while the source has read messages it has not acked, or while
// pending, when given, says so from the counters (which it may add to,
// say with a Pub/Sub fake's acks).
func Watched(job jobrun.Options, pending func(counters map[string]int64) bool) jobrun.Options {
	job.What, job.Hint = "streaming job", stallHint
	job.Progress = func(_ context.Context, m metrics.Results) (jobrun.Sample, error) {
		c := map[string]int64{}
		for _, r := range m.AllMetrics().Counters() {
			c[r.Namespace()+"/"+r.Name()] += r.Result()
		}
		// The source acks a message only after the bundle that read it
		// committed: read and not acked is work in flight.
		busy := c["pubsubio/messages_read"] > c["pubsubio/messages_acked"]
		if pending != nil && pending(c) {
			busy = true
		}
		return jobrun.Sample{Counters: c, Pending: busy}, nil
	}
	return job
}

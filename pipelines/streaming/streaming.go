// Package streaming is the Pub/Sub deduplication pipeline: read messages
// from a subscription, decode their JSON payloads into rows (the orders rows
// by default), keep the first message per key with dedup.KeepFirst and a
// TTL, and publish each kept row as JSON to an output topic. Messages that
// cannot be decoded go to a dead-letter topic with the reason in the
// "dlq_reason" attribute.
//
// Pub/Sub delivers at least once: messages are redelivered when an ack is
// late or lost, and publishers retry (same payload, new message id).
// KeepFirst absorbs what comes twice, so the output has one message per
// key while the key's state lives (StateTTL).
//
// A message is acked only once its row is safe (pubsubio.Ack, docs/streaming.md
// "When a message is acked"): after its row was published and Pub/Sub
// confirmed it, after its dead letter was published, or when KeepFirst
// dropped it as a duplicate of a key whose row is itself published or
// still unacked. So a crash at any moment leaves every message whose row
// is not yet out unacked, and Pub/Sub redelivers it to the next run.
//
// On Dataflow (Config.Native) the pipeline uses Beam's io/pubsubio, which
// Dataflow executes natively and acks itself; elsewhere (Prism, Flink) the
// Go-native source of transforms/pubsubio. Both produce pubsubio.Message,
// so the rest of the pipeline is shared. Run and RunLive run it as a job
// with pipelines/jobrun; the package streaming/demo runs it against an
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

	"github.com/beamdedup/beamdedup/coders/keycoder"
	"github.com/beamdedup/beamdedup/pipelines/jobrun"
	"github.com/beamdedup/beamdedup/pipelines/orders"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/pgsink"
	"github.com/beamdedup/beamdedup/transforms/pubsubio"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
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

// Namespace is the metric namespace of the pipeline's own counter,
// MetricDeadLettered.
const (
	Namespace          = "beamdedup/streaming"
	MetricDeadLettered = "dead_lettered"
)

var deadLettered = beam.NewCounter(Namespace, MetricDeadLettered)

// Config configures Build. Subscription and OutputTopic are full names
// (projects/P/subscriptions/S, projects/P/topics/T).
type Config struct {
	Subscription string
	OutputTopic  string
	// DeadLetterTopic receives undecodable messages. Empty: they are
	// counted (MetricDeadLettered), acked and dropped.
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
	// Endpoint is an emulator host:port for the Go-native source, sink and
	// acks.
	Endpoint           string
	IDAttribute        string
	TimestampAttribute string
	// Read adds options of the Go-native source (IdleStop, Readers, ...).
	Read []pubsubio.Option
	// Dedup adds KeepFirst options after the pipeline's own:
	// dedup.StateTTL(DefaultStateTTL) and the UID. A dedup.StateTTL here
	// replaces the default, with dedup's meaning (0 keeps keys forever);
	// duplicates further apart than the TTL are emitted again. KeepFirst
	// runs on the messages keyed by PartitionBy (or the message id), so
	// options that name columns (PartitionBy, OnTime, ...) do not apply.
	//
	// On an unbounded input KeepFirst deletes expired keys with
	// processing-time timers, and Prism keeps a job alive until its pending
	// timers fire: after an IdleStop the job lingers up to the TTL. Finite
	// runs (demos, tests) add dedup.CleanupTimers(false), or keep keys
	// forever with dedup.StateTTL(0).
	Dedup []dedup.Option

	// Postgres, when set, is the DSN of a PostgreSQL database into whose
	// Table (DefaultTable when empty; CreateTable makes one for the orders
	// rows) each kept row is also written, through pgsink, before it is
	// published; the row's message is acked only once both are done. A row
	// the table refuses is dead-lettered instead. Prefer a DSN without its
	// password (PGPASSWORD): the DSN travels in the pipeline.
	Postgres string
	Table    string

	// fusedSink drops the Reshuffle before the publish: only the
	// reproduction of the Prism stall uses it.
	fusedSink bool
}

// Outputs are the pipeline's collections.
type Outputs struct {
	Messages    beam.PCollection // pubsubio.Message as read
	Kept        beam.PCollection // KV<[]byte, pubsubio.Message>: the key and the message KeepFirst kept
	Published   beam.PCollection // pubsubio.Message published to OutputTopic and confirmed
	DeadLetters beam.PCollection // pubsubio.Message for DeadLetterTopic
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
	if !cfg.ByMessageID {
		if _, err := keycoder.New(reflect.TypeFor[T](), cfg.PartitionBy); err != nil {
			return Outputs{}, fmt.Errorf("streaming: PartitionBy: %w", err)
		}
	}
	if cfg.UID == "" {
		cfg.UID = DefaultUID
	}
	s = s.Scope("streaming")

	var out Outputs
	var err error
	var attrs, conn []pubsubio.Option
	if cfg.IDAttribute != "" {
		attrs = append(attrs, pubsubio.IDAttribute(cfg.IDAttribute))
	}
	if cfg.TimestampAttribute != "" {
		attrs = append(attrs, pubsubio.TimestampAttribute(cfg.TimestampAttribute))
	}
	if cfg.Endpoint != "" {
		conn = append(conn, pubsubio.Endpoint(cfg.Endpoint))
	}
	if cfg.Native {
		out.Messages, err = pubsubio.ReadNative(s, cfg.Subscription, attrs...)
	} else {
		out.Messages, err = pubsubio.TryRead(s, cfg.Subscription, append(append(append([]pubsubio.Option{}, cfg.Read...), attrs...), conn...)...)
	}
	if err != nil {
		return Outputs{}, fmt.Errorf("streaming: %w", err)
	}
	// ack acks col's messages after the step that made them safe (fused
	// with it); on Dataflow the native source has acked them already.
	ack := func(col beam.PCollection) error {
		if cfg.Native {
			return nil
		}
		return pubsubio.TryAck(s, cfg.Subscription, col, conn...)
	}
	publish := func(topic string, col beam.PCollection) (beam.PCollection, error) {
		if cfg.Native {
			return beam.PCollection{}, pubsubio.WriteNative(s, topic, col)
		}
		return pubsubio.TryWrite(s, topic, col, conn...)
	}

	// Decode (and dead-letter) first, in the source's fused bundle; key
	// each message by its row's PartitionBy columns or its id.
	df := &decodeFn[T]{Subscription: cfg.Subscription, Columns: cfg.PartitionBy}
	if cfg.ByMessageID {
		df.Columns = nil
	}
	rows, bad := beam.ParDo2(s, df, out.Messages)
	out.DeadLetters = bad

	dopts := append([]dedup.Option{dedup.StateTTL(DefaultStateTTL), dedup.UID(cfg.UID)}, cfg.Dedup...)
	kept, dropped, refusedByDedup, err := keepFirst(s, rows, dopts)
	if err != nil {
		return Outputs{}, fmt.Errorf("streaming: %w (KeepFirst runs on the messages keyed by Config.PartitionBy: Config.Dedup takes no options that name columns)", err)
	}
	out.Kept = kept
	// The Reshuffle keeps KeepFirst's stage from being the last of its
	// fused chain: on Prism a stage with no output and no timers busy-waits
	// in every running bundle, and 8 such bundles starve the state round
	// trips until the job stalls (notes/beam-defects.md, "A streaming job
	// stalls"). The publish stage after it has short bundles.
	if !cfg.fusedSink {
		kept = beam.Reshuffle(s, kept)
	}
	var refused beam.PCollection
	if cfg.Postgres != "" {
		if cfg.ByMessageID {
			return Outputs{}, errors.New("streaming: Postgres needs PartitionBy (the table's key), not ByMessageID")
		}
		table := cfg.Table
		if table == "" {
			table = DefaultTable
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := pgsink.CheckTable(ctx, reflect.TypeFor[T](), pgsink.DSN(cfg.Postgres), pgsink.Table(table), rowspec.PartitionBy(cfg.PartitionBy...))
		cancel()
		if err != nil {
			return Outputs{}, fmt.Errorf("streaming: %w", err)
		}
		kept, refused = beam.ParDo2(s, &postgresFn[T]{DSN: cfg.Postgres, Table: table, Columns: cfg.PartitionBy, Subscription: cfg.Subscription}, kept)
	}
	encoded := beam.ParDo(s, &encodeFn[T]{}, kept)

	// Every message is acked in the stage that made it safe: a kept one
	// after its row's publish, a dead letter after its publish, a
	// duplicate where KeepFirst dropped it (its key's row is published or
	// its message still unacked).
	if out.Published, err = publish(cfg.OutputTopic, encoded); err != nil {
		return Outputs{}, fmt.Errorf("streaming: %w", err)
	}
	if err := ack(out.Published); err != nil {
		return Outputs{}, fmt.Errorf("streaming: %w", err)
	}
	if dropped.IsValid() {
		if err := ack(beam.DropKey(s, dropped)); err != nil {
			return Outputs{}, fmt.Errorf("streaming: %w", err)
		}
	}
	bad = beam.Flatten(s, bad, refusedByDedup)
	if refused.IsValid() {
		bad = beam.Flatten(s, bad, refused)
	}
	out.DeadLetters = bad
	if cfg.DeadLetterTopic != "" {
		dead, err := publish(cfg.DeadLetterTopic, bad)
		if err == nil {
			err = ack(dead)
		}
		if err != nil {
			return Outputs{}, fmt.Errorf("streaming: %w", err)
		}
	} else if err := ack(bad); err != nil {
		return Outputs{}, fmt.Errorf("streaming: %w", err)
	}
	return out, nil
}

// Register registers the DoFns of the pipeline for row type T; call it from
// an init function of the package that defines T (orders.Order is
// registered here).
func Register[T any]() {
	beam.RegisterType(reflect.TypeFor[T]())
	register.DoFn4x0[context.Context, pubsubio.Message, func([]byte, pubsubio.Message), func(pubsubio.Message)](&decodeFn[T]{})
	register.DoFn2x1[[]byte, pubsubio.Message, pubsubio.Message](&encodeFn[T]{})
	register.Emitter2[[]byte, pubsubio.Message]()
	register.Emitter1[pubsubio.Message]()
	registerPostgres[T]()
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

// decodeFn checks that a payload decodes into a row and keys the message
// by the row's Columns (keycoder: GROUP BY equality), or by its ID when
// Columns is empty; what does not decode goes out as a dead letter
// carrying the original payload and attributes plus the reason.
type decodeFn[T any] struct {
	Subscription string
	Columns      []string

	enc *keycoder.Encoder
}

func (f *decodeFn[T]) Setup() error {
	if len(f.Columns) == 0 {
		return nil
	}
	enc, err := keycoder.New(reflect.TypeFor[T](), f.Columns)
	f.enc = enc
	return err
}

func (f *decodeFn[T]) ProcessElement(ctx context.Context, m pubsubio.Message, rows func([]byte, pubsubio.Message), dead func(pubsubio.Message)) {
	row, err := decode[T](m.Data)
	if err != nil {
		dead(deadLetter(m, err, f.Subscription))
		deadLettered.Inc(ctx, 1)
		return
	}
	if f.enc == nil {
		rows([]byte(m.ID), m)
		return
	}
	rows(f.enc.Append(nil, reflect.ValueOf(row)), m)
}

// deadLetter is the dead letter of m: its payload, attributes and ordering
// key, the reason, and m's ack id (not published), so that m is acked once
// the dead letter is out.
func deadLetter(m pubsubio.Message, reason error, subscription string) pubsubio.Message {
	attrs := make(map[string]string, len(m.Attributes)+3)
	for k, v := range m.Attributes {
		attrs[k] = v
	}
	attrs[AttrReason] = reason.Error()
	attrs[AttrMessageID] = m.MessageID
	attrs[AttrSubscription] = subscription
	return pubsubio.Message{Data: m.Data, Attributes: attrs, OrderingKey: m.OrderingKey,
		MessageID: m.MessageID, AckID: m.AckID}
}

// encodeFn makes the output message of a kept one: its row as JSON, and
// the kept message's ids, for the ack after the publish.
type encodeFn[T any] struct{}

func (*encodeFn[T]) ProcessElement(_ []byte, m pubsubio.Message) pubsubio.Message {
	data := m.Data // decodeFn accepted it, so it decodes again
	if row, err := decode[T](m.Data); err == nil {
		if b, err := json.Marshal(row); err == nil { // a struct of JSON-decoded values always encodes
			data = b
		}
	}
	return pubsubio.Message{Data: data, Attributes: map[string]string{}, MessageID: m.MessageID, AckID: m.AckID}
}

// Run builds the pipeline for the orders rows and runs it as a job until it
// ends (IdleStop on Prism; savepoint/cancel on Flink; drain on Dataflow),
// returning KeepFirst's counters. beam.Init must have been called.
//
// On Prism and other portable runners the job is watched (Watched): when
// the source has read messages not yet acked and no counter moves for
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
// work while messages read are not yet acked (each is acked once its row
// is safe), or while pending, when given, says so from the counters (which
// it may add to, say with a Pub/Sub fake's acks).
func Watched(job jobrun.Options, pending func(counters map[string]int64) bool) jobrun.Options {
	job.What, job.Hint = "streaming job", stallHint
	job.Progress = func(_ context.Context, m metrics.Results) (jobrun.Sample, error) {
		c := map[string]int64{}
		for _, r := range m.AllMetrics().Counters() {
			c[r.Namespace()+"/"+r.Name()] += r.Result()
		}
		// A message is acked once its row is safe: read and not acked is
		// work in flight.
		ns := pubsubio.Namespace + "/"
		busy := c[ns+pubsubio.MetricRead] > c[ns+pubsubio.MetricAcked]+c[ns+pubsubio.MetricAckFailed]
		if pending != nil && pending(c) {
			busy = true
		}
		return jobrun.Sample{Counters: c, Pending: busy}, nil
	}
	return job
}

// Package kafka is the Kafka deduplication pipeline of seed 001: read a
// topic of orders with duplicates (every order priced under 100 written
// twice, keyed by order_id, two partitions), decode each JSON value into a
// row (the orders rows by default; any row type with BuildFor[T]),
// dead-letter what does not decode (to a topic, with its bytes and the
// reason in the "dlq_reason" header), keep the first record per key with
// dedup.KeepFirst (by arrival, or by event time on a column), write each
// kept row as JSON to an output topic and, optionally, into a PostgreSQL
// table.
//
// A record's offset is committed for the consumer group only once it is
// safe (kafkaio.Commit): its row written to the output topic (and the
// table), its dead letter written, or dropped by KeepFirst as a duplicate
// of a key whose row is itself written or not yet committed; and only
// once every record before it in its partition is. So a crash at any
// moment leaves every record whose row is not out uncommitted, and the
// next run reads it again.
package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beamdedup/beamdedup/coders/keycoder"
	"github.com/beamdedup/beamdedup/internal/rowcol"
	"github.com/beamdedup/beamdedup/pipelines/jsonl"
	"github.com/beamdedup/beamdedup/pipelines/orders"
	"github.com/beamdedup/beamdedup/transforms/deadletter"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/kafkaio"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

func init() {
	Register[orders.Order]()
	register.DoFn2x0[deadletter.DeadLetter, func(kafkaio.Record)](&refusedFn{})
}

// Headers set on dead-lettered records, beside the record's own.
const (
	HeaderReason    = "dlq_reason"
	HeaderTopic     = "dlq_topic"
	HeaderPartition = "dlq_partition"
	HeaderOffset    = "dlq_offset"
)

// Defaults of Config.
const (
	// DefaultStateTTL is how long KeepFirst remembers a key (processing
	// time) unless Config.Dedup says otherwise: the seed's assumption that
	// duplicates arrive within 2 hours.
	DefaultStateTTL = 2 * time.Hour
	DefaultUID      = "kafka-dedup"
)

// Namespace is the metric namespace of the pipeline's own counters.
const (
	Namespace          = "beamdedup/kafka"
	MetricDeadLettered = "dead_lettered"
)

var deadLettered = beam.NewCounter(Namespace, MetricDeadLettered)

// Config configures Build.
type Config struct {
	// Brokers are the bootstrap brokers, host:port, comma-separated.
	Brokers string
	// InputTopic, OutputTopic and DeadLetterTopic are required;
	// DeadLetterTopic receives what does not decode, with its bytes.
	InputTopic, OutputTopic, DeadLetterTopic string
	// Group is the consumer group whose offsets the pipeline starts from
	// and commits (required).
	Group string

	// PartitionBy names the key columns of the row type (beam tags).
	// Build defaults to "order_id".
	PartitionBy []string
	// OnTime, when set, names a time column of the row (created_at for the
	// orders): KeepFirst then keeps the row with the earliest event time of
	// each key, emitted once the watermark passes it, and the row's record
	// is stamped with it (its Timestamp, as the seed's table declares
	// created_at the record's timestamp). Empty: watermarkless, the first
	// record to arrive is kept and written at once.
	OnTime string
	// UID names the KeepFirst step and its state (default "kafka-dedup").
	UID string

	// Read adds options of the source (IdleStop, StopWith, ...).
	Read []kafkaio.Option
	// Dedup adds KeepFirst options after the pipeline's own:
	// dedup.StateTTL(DefaultStateTTL) and the UID. KeepFirst runs on the
	// records keyed by PartitionBy, so options that name columns do not
	// apply.
	Dedup []dedup.Option
	// Write adds options of the writes (WriteTimeout).
	Write []kafkaio.Option

	// Postgres, when set, is the DSN of a PostgreSQL database into whose
	// Table (DefaultTable when empty) each kept row is also written,
	// before its record goes to the output topic; its offset is committed
	// only once both are done. A row the table refuses is dead-lettered.
	Postgres string
	Table    string
}

// Outputs are the pipeline's collections.
type Outputs struct {
	Records     beam.PCollection // kafkaio.Record as read
	Kept        beam.PCollection // KV<[]byte, kafkaio.Record>: the key and the record KeepFirst kept
	Written     beam.PCollection // kafkaio.Record written to OutputTopic and confirmed
	DeadLetters beam.PCollection // kafkaio.Record for DeadLetterTopic
}

// Build adds the pipeline for the orders rows (pipelines/orders.Order) to s.
func Build(s beam.Scope, cfg Config) (Outputs, error) {
	if len(cfg.PartitionBy) == 0 {
		cfg.PartitionBy = []string{"order_id"}
	}
	return BuildFor[orders.Order](s, cfg)
}

// BuildFor is Build for row type T, a struct decoded from the record's
// value as a JSON Lines file's line is (pipelines/jsonl). Call Register[T]
// in an init function first.
func BuildFor[T any](s beam.Scope, cfg Config) (Outputs, error) {
	if err := cfg.check(); err != nil {
		return Outputs{}, err
	}
	rowT := reflect.TypeFor[T]()
	if _, err := keycoder.New(rowT, cfg.PartitionBy); err != nil {
		return Outputs{}, fmt.Errorf("kafka: PartitionBy: %w", err)
	}
	if cfg.OnTime != "" {
		if _, err := rowcol.NewTimeColumn(rowT, cfg.OnTime); err != nil {
			return Outputs{}, fmt.Errorf("kafka: %w", err)
		}
	}
	if cfg.UID == "" {
		cfg.UID = DefaultUID
	}
	s = s.Scope("kafka")
	var out Outputs
	var err error
	read := append([]kafkaio.Option{kafkaio.Group(cfg.Group)}, cfg.Read...)
	if out.Records, err = kafkaio.TryRead(s, cfg.Brokers, cfg.InputTopic, read...); err != nil {
		return Outputs{}, fmt.Errorf("kafka: %w", err)
	}
	commit := func(col beam.PCollection) error { return kafkaio.TryCommit(s, cfg.Group, col) }
	write := func(topic string, col beam.PCollection) (beam.PCollection, error) {
		return kafkaio.TryWrite(s, cfg.Brokers, topic, col, cfg.Write...)
	}

	// Decode (and dead-letter) in the source's fused bundle; key each
	// record by its row's PartitionBy columns.
	rows, bad := beam.ParDo2(s, &decodeFn[T]{Columns: cfg.PartitionBy, OnTime: cfg.OnTime}, out.Records)
	dopts := []dedup.Option{dedup.StateTTL(DefaultStateTTL), dedup.UID(cfg.UID)}
	if cfg.OnTime != "" {
		dopts = append(dopts, rowspec.OnTime("timestamp")) // the record's, set from the row's column
	}
	res, err := dedup.TryKeepFirst(s, rows, append(append(dopts, cfg.Dedup...), dedup.OutputDropped())...)
	if err != nil {
		return Outputs{}, fmt.Errorf("kafka: %w (KeepFirst runs on the records keyed by Config.PartitionBy: Config.Dedup takes no options that name columns)", err)
	}
	out.Kept = res.Rows
	// As in pipelines/streaming: a Reshuffle keeps KeepFirst's stage from
	// being the last of its fused chain, which stalls Prism
	// (notes/beam-defects.md, "A streaming job stalls").
	kept := beam.Reshuffle(s, res.Rows)
	dead := []beam.PCollection{bad, beam.ParDo(s, &refusedFn{}, res.DeadLetters)}
	if cfg.Postgres != "" {
		var refused beam.PCollection
		if kept, refused, err = writePostgres[T](s, cfg, kept); err != nil {
			return Outputs{}, err
		}
		dead = append(dead, refused)
	}
	// Every record is committed in the stage that made it safe: a kept
	// one after its row's write, a dead letter after its write, a
	// duplicate where KeepFirst dropped it.
	// The output record of a kept one is the record itself: its key, its
	// value (the row, as written to the input), its headers and
	// timestamp, with where it was read, for the commit after the write.
	if out.Written, err = write(cfg.OutputTopic, beam.DropKey(s, kept)); err != nil {
		return Outputs{}, fmt.Errorf("kafka: %w", err)
	}
	if err := commit(out.Written); err != nil {
		return Outputs{}, fmt.Errorf("kafka: %w", err)
	}
	if err := commit(beam.DropKey(s, res.Dropped)); err != nil {
		return Outputs{}, fmt.Errorf("kafka: %w", err)
	}
	out.DeadLetters = beam.Flatten(s, dead...)
	deadWritten, err := write(cfg.DeadLetterTopic, out.DeadLetters)
	if err == nil {
		err = commit(deadWritten)
	}
	if err != nil {
		return Outputs{}, fmt.Errorf("kafka: %w", err)
	}
	return out, nil
}

func (c *Config) check() error {
	var missing []string
	for _, f := range []struct{ name, v string }{{"Brokers", c.Brokers}, {"InputTopic", c.InputTopic},
		{"OutputTopic", c.OutputTopic}, {"DeadLetterTopic", c.DeadLetterTopic}, {"Group", c.Group}} {
		if f.v == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("kafka: Config needs %v", missing)
	}
	if c.OutputTopic == c.InputTopic || c.DeadLetterTopic == c.InputTopic || c.OutputTopic == c.DeadLetterTopic {
		return errors.New("kafka: InputTopic, OutputTopic and DeadLetterTopic must be three topics")
	}
	return nil
}

// Register registers the DoFns of the pipeline for row type T; call it
// from an init function of the package that defines T (orders.Order is
// registered here).
func Register[T any]() {
	beam.RegisterType(reflect.TypeFor[T]())
	register.DoFn5x1[context.Context, beam.EventTime, kafkaio.Record, func(beam.EventTime, []byte, kafkaio.Record), func(kafkaio.Record), error](&decodeFn[T]{})
	register.Emitter3[beam.EventTime, []byte, kafkaio.Record]()
	register.Emitter1[kafkaio.Record]()
	registerPostgres[T]()
}

// decodeFn keys each record by its row's Columns (keycoder: GROUP BY
// equality); with OnTime, it stamps the record (its Timestamp and its
// element's) with the row's event time. What does not decode goes out as
// a dead letter with its bytes and the reason.
type decodeFn[T any] struct {
	Columns []string
	OnTime  string

	enc *keycoder.Encoder
	at  rowcol.TimeColumn
}

func (f *decodeFn[T]) Setup() error {
	enc, err := keycoder.New(reflect.TypeFor[T](), f.Columns)
	if err != nil {
		return err
	}
	f.enc = enc
	if f.OnTime != "" {
		f.at, err = rowcol.NewTimeColumn(reflect.TypeFor[T](), f.OnTime)
	}
	return err
}

func (f *decodeFn[T]) ProcessElement(ctx context.Context, ts beam.EventTime, r kafkaio.Record, rows func(beam.EventTime, []byte, kafkaio.Record), dead func(kafkaio.Record)) error {
	row, reason := jsonl.ParseRow(reflect.TypeFor[T](), string(r.Value))
	if reason != "" {
		deadLettered.Inc(ctx, 1)
		dead(DeadLetter(r, reason))
		return nil
	}
	v := reflect.ValueOf(row)
	if f.OnTime != "" {
		us, reason := f.at.Read(v)
		if reason != "" {
			deadLettered.Inc(ctx, 1)
			dead(DeadLetter(r, reason))
			return nil
		}
		r.Timestamp = time.UnixMicro(us).UTC()
		ts = mtime.FromTime(r.Timestamp)
	}
	rows(ts, f.enc.Append(nil, v), r)
	return nil
}

// DeadLetter is the dead letter of r: its key, value, headers and
// timestamp, with headers naming the reason and where it was read, and
// r's place (for the commit after its write).
func DeadLetter(r kafkaio.Record, reason string) kafkaio.Record {
	d := r
	d.Headers = append(append([]kafkaio.Header{}, r.Headers...),
		kafkaio.Header{Key: HeaderReason, Value: []byte(reason)},
		kafkaio.Header{Key: HeaderTopic, Value: []byte(r.Topic)},
		kafkaio.Header{Key: HeaderPartition, Value: []byte(strconv.Itoa(int(r.Partition)))},
		kafkaio.Header{Key: HeaderOffset, Value: []byte(strconv.FormatInt(r.Offset, 10))})
	return d
}

// refusedFn turns a record KeepFirst refused back into the record, as a
// dead letter with KeepFirst's reason, so that it is committed once the
// dead letter is written.
type refusedFn struct{}

func (*refusedFn) ProcessElement(d deadletter.DeadLetter, emit func(kafkaio.Record)) {
	var kv struct{ Value kafkaio.Record }
	r := kv.Value
	if err := json.Unmarshal([]byte(d.Row), &kv); err == nil {
		r = kv.Value
	} else {
		// Not a record: write what there is; no offset is committed for it.
		r = kafkaio.Record{Value: []byte(d.Row)}
	}
	emit(DeadLetter(r, d.Transform+": "+d.Reason))
}

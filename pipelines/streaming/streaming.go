// Package streaming is the deduplication pipeline of a stream, over Kafka
// (seed 001: a topic of orders and a consumer group) or Pub/Sub (a
// subscription): decode each element's JSON payload into a row (the orders
// rows by default; any row type with BuildFor), dead-letter what does not
// decode (the reason in the "dlq_reason" header or attribute), keep the
// first element per key with dedup.KeepFirst, and write each kept row to
// the output topic and, optionally, into a PostgreSQL table.
//
// Streams deliver at least once; KeepFirst absorbs what comes twice while
// the key's state lives (StateTTL). An element is settled (its offset
// committed, or its message acked) only once what the pipeline made of it
// is safe: its row written (and in the table), its dead letter written, or
// dropped by KeepFirst as a duplicate of a key whose row is written or not
// yet settled. So after a crash the next run reads again every element
// whose row is not out.
//
// Build is the pipeline; a Source says how it reads, writes and settles
// its elements (Kafka, PubSub). Run runs it as a job (internal/jobrun)
// until it ends by itself or is stopped, and then drains it. Files:
//
//	streaming.go  Config, Build: the pipeline over a source
//	source.go     Source: what a source does for the pipeline
//	kafka.go      the Kafka source (kafkaio), the group's offsets
//	pubsub.go     the Pub/Sub source (pubsubio), native on Dataflow
//	elements.go   what the steps do with a source's elements (records, messages)
//	decode.go     decode and key, KeepFirst's dead letters, the output row
//	postgres.go   the kept rows into a table
//	run.go        Run: the job, its drain, its Status and watchdog
//	produce.go    orders into a Kafka topic, for runjob and the tests
package streaming

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamdedup/beamdedup/coders/keycoder"
	"github.com/beamdedup/beamdedup/internal/rowcol"
	"github.com/beamdedup/beamdedup/internal/unbounded"
	"github.com/beamdedup/beamdedup/pipelines/orders"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/pgsink"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

func init() {
	Register[orders.Order]()
}

// Config configures the pipeline over a source.
type Config struct {
	// PartitionBy names the key columns of the row type (beam tags).
	// Build defaults to "order_id"; a source keyed by its messages' ids
	// (PubSub.ByMessageID) takes none.
	PartitionBy []string
	// OnTime, when set, names a time column of the row (created_at for
	// the orders): KeepFirst then keeps each key's row with the earliest
	// event time, emitted once the watermark passes it, and the record's
	// Timestamp is set from it (Kafka only). Empty: the first element to
	// arrive is kept and written at once.
	OnTime string
	// UID names the KeepFirst step and its state (default "kafka-dedup"
	// for Kafka, "streaming-dedup" for Pub/Sub).
	UID string
	// Dedup adds KeepFirst options after the pipeline's own: dedup.StateTTL
	// (DefaultKafkaStateTTL, DefaultPubSubStateTTL) and the UID. KeepFirst
	// runs on the elements keyed by PartitionBy, so options that name the
	// row's columns do not apply.
	//
	// Prism keeps a job alive until its pending timers fire, KeepFirst's
	// cleanup timers among them: a run that ends by itself (an idle stop)
	// adds dedup.CleanupTimers(false), or keeps keys forever (StateTTL(0)).
	Dedup []dedup.Option
	// Postgres, when set, is the DSN of a PostgreSQL database into whose
	// Table (DefaultTable when empty; see CreateTable) each kept row is also
	// written before it goes to the output topic. A row the table refuses
	// is dead-lettered. Prefer a DSN without its password (PGPASSWORD): the
	// DSN travels in the pipeline.
	Postgres string
	Table    string
}

// Outputs are the pipeline's collections, of the source's elements E.
type Outputs struct {
	Read        beam.PCollection // E as read
	Kept        beam.PCollection // KV<[]byte, E>: the key and the element KeepFirst kept
	Written     beam.PCollection // E written to the output topic and confirmed (invalid on Dataflow's native IO)
	DeadLetters beam.PCollection // E for the dead-letter topic
}

// Build adds the pipeline for the orders rows (pipelines/orders.Order),
// keyed by order_id unless cfg says otherwise, to s.
func Build[E any](s beam.Scope, src Source[E], cfg Config) (Outputs, error) {
	if len(cfg.PartitionBy) == 0 && !src.spec().byID {
		cfg.PartitionBy = []string{"order_id"}
	}
	return BuildFor[orders.Order](s, src, cfg)
}

// BuildFor is Build for row type T, a struct decoded from the element's
// payload as a JSON Lines file's line is (pipelines/jsonl: a row whose
// *T has a method Validate() error that refuses it is dead-lettered too).
// Call Register[T] in an init function first.
func BuildFor[T any, E any](s beam.Scope, src Source[E], cfg Config) (Outputs, error) {
	return build[T](s, src, cfg, nil, 0)
}

// build is BuildFor with the source's readers attached to ctl and ending
// when idle for idleStop (Run's).
func build[T any, E any](s beam.Scope, src Source[E], cfg Config, ctl *unbounded.Control, idleStop time.Duration) (Outputs, error) {
	sp := src.spec()
	fail := func(err error) (Outputs, error) { return Outputs{}, fmt.Errorf("%s: %w", sp.name, err) }
	if err := src.check(false); err != nil {
		return Outputs{}, err
	}
	if err := cfg.check(reflect.TypeFor[T](), sp); err != nil {
		return fail(err)
	}
	if _, stamps := src.elements().stamped(*new(E), time.Time{}); cfg.OnTime != "" && !stamps {
		return fail(fmt.Errorf("OnTime: the %s hold no event time of their own (the source sets it)", sp.noun))
	}
	s = s.Scope(sp.name)
	var out Outputs
	var err error
	if out.Read, err = src.read(s, ctl, idleStop); err != nil {
		return fail(err)
	}

	// Decode (and dead-letter) in the source's fused bundle; key each
	// element by its row's PartitionBy columns or its id.
	rows, bad := beam.ParDo2(s, &decodeFn[T, E]{Input: sp.input, Namespace: namespace(sp), Columns: cfg.PartitionBy, OnTime: cfg.OnTime}, out.Read)
	dopts := []dedup.Option{dedup.StateTTL(sp.stateTTL), dedup.UID(cmp.Or(cfg.UID, sp.uid))}
	if cfg.OnTime != "" {
		dopts = append(dopts, rowspec.OnTime(timeColumn)) // the element's, set from the row's column
	}
	res, err := dedup.TryKeepFirst(s, rows, append(append(dopts, cfg.Dedup...), dedup.OutputDropped())...)
	if err != nil {
		return fail(fmt.Errorf("%w (KeepFirst runs on the %s keyed by Config.PartitionBy: Config.Dedup takes no options that name the row's columns)", err, sp.noun))
	}
	out.Kept = res.Rows
	// A Reshuffle keeps KeepFirst's stage from being the last of its fused
	// chain, which on Prism busy-waits until the job stalls
	// (notes/beam-defects.md, "A streaming job stalls").
	kept := beam.Reshuffle(s, res.Rows)
	dead := []beam.PCollection{bad, beam.ParDo(s, &refusedFn[E]{Input: sp.input}, res.DeadLetters)}
	if cfg.Postgres != "" {
		var refused beam.PCollection
		if kept, refused, err = writePostgres[T, E](s, sp, cfg, kept); err != nil {
			return fail(err)
		}
		dead = append(dead, refused)
	}

	// Every element is settled in the stage that made it safe.
	if out.Written, err = src.write(s, sp.output, beam.ParDo(s, &outputFn[T, E]{}, kept)); err != nil {
		return fail(err)
	}
	out.DeadLetters = beam.Flatten(s, dead...)
	deadWritten := out.DeadLetters
	if sp.dead != "" {
		if deadWritten, err = src.write(s, sp.dead, out.DeadLetters); err != nil {
			return fail(err)
		}
	}
	if err := src.settle(s, out.Written, res.Dropped, deadWritten); err != nil {
		return fail(err)
	}
	return out, nil
}

// check refuses columns the row type does not have.
func (c Config) check(rowT reflect.Type, sp spec) error {
	if sp.byID {
		if c.Postgres != "" {
			return errors.New("Postgres needs PartitionBy (the table's key), not ByMessageID")
		}
		if c.OnTime != "" {
			return errors.New("OnTime needs PartitionBy, not ByMessageID")
		}
		return nil
	}
	if len(c.PartitionBy) == 0 {
		return errors.New("set PartitionBy (row columns)")
	}
	if _, err := keycoder.New(rowT, c.PartitionBy); err != nil {
		return fmt.Errorf("PartitionBy: %w", err)
	}
	if c.OnTime == "" {
		return nil
	}
	_, err := rowcol.NewTimeColumn(rowT, c.OnTime)
	return err
}

// writePostgres adds the table's step after kept: the elements whose rows
// are in the table, and the dead letters of those it refused.
func writePostgres[T any, E any](s beam.Scope, sp spec, cfg Config, kept beam.PCollection) (written, refused beam.PCollection, err error) {
	table := cmp.Or(cfg.Table, DefaultTable)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	err = pgsink.CheckTable(ctx, reflect.TypeFor[T](), pgsink.DSN(cfg.Postgres), pgsink.Table(table), rowspec.PartitionBy(cfg.PartitionBy...))
	cancel()
	if err != nil {
		return written, refused, err
	}
	written, refused = beam.ParDo2(s, &postgresFn[T, E]{DSN: cfg.Postgres, Table: table, Columns: cfg.PartitionBy,
		Input: sp.input, Namespace: namespace(sp)}, kept)
	return written, refused, nil
}

// namespace is the namespace of the pipeline's own counters.
func namespace(sp spec) string { return "beamdedup/" + sp.name }

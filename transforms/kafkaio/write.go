package kafkaio

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/timers"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Write writes each Record of col (Key, Value, Headers, Timestamp) to
// topic on brokers with an idempotent producer, acknowledged by every
// in-sync replica, and returns the records as they came (with where they
// were read, for Commit) once Kafka confirmed them: at the end of each
// bundle, in the global window. A record's partition is chosen by its key
// (murmur2, as the Java client), so the records of a key keep their order.
//
// A write that fails, or is not confirmed within WriteTimeout, fails the
// bundle, naming the records that were not written. It panics on invalid
// options; TryWrite returns the error.
func Write(s beam.Scope, brokers, topic string, col beam.PCollection, opts ...Option) beam.PCollection {
	out, err := TryWrite(s, brokers, topic, col, opts...)
	if err != nil {
		panic(err)
	}
	return out
}

// TryWrite is Write returning construction errors.
func TryWrite(s beam.Scope, brokers, topic string, col beam.PCollection, opts ...Option) (beam.PCollection, error) {
	var typeErr error
	if got := col.Type().Type(); got != recordT {
		typeErr = fmt.Errorf("needs a PCollection<kafkaio.Record>, got %v", got)
	}
	c, err := newConfig("kafkaio.Write", writeOptions, opts, checkBrokers(brokers), checkTopic(topic), typeErr)
	if err != nil {
		return beam.PCollection{}, err
	}
	s = s.Scope("kafkaio.Write")
	if c.txnID != "" {
		return beam.ParDo(s, &txnWriteFn{Brokers: brokers, Topic: topic, ID: c.txnID, TimeoutMs: c.writeTimeout.Milliseconds(),
			State: state.MakeValueState[txnState]("txns"), Settle: timers.InProcessingTime("settle")}, beam.ParDo(s, &shardFn{}, col)), nil
	}
	return beam.ParDo(s, &writeFn{Brokers: brokers, Topic: topic, TimeoutMs: c.writeTimeout.Milliseconds()}, col), nil
}

type writeFn struct {
	Brokers   string
	Topic     string
	TimeoutMs int64

	cl *kgo.Client // the instance's own: a bundle waits for its own records only

	bundle bundleWrites
}

// bundleWrites are a bundle's records sent to Kafka, and what came of
// them.
type bundleWrites struct {
	// The bundle's context, ending WriteTimeout after its start: kgo's
	// record timeout counts from the record's timestamp, the input's.
	ctx     context.Context
	cancel  context.CancelFunc
	timeout time.Duration
	wg      sync.WaitGroup
	mu      sync.Mutex
	pending []Record
	failed  []int // indexes into pending
	first   error
}

func (b *bundleWrites) start(timeout time.Duration) {
	b.pending, b.failed, b.first, b.timeout = b.pending[:0], b.failed[:0], nil, timeout
	b.ctx, b.cancel = context.WithTimeout(context.Background(), timeout)
}

func (b *bundleWrites) produce(cl *kgo.Client, r Record, topic string) {
	i := len(b.pending)
	b.pending = append(b.pending, r)
	b.wg.Add(1)
	cl.Produce(b.ctx, toKgo(r, topic), func(_ *kgo.Record, err error) {
		if err != nil {
			b.mu.Lock()
			b.failed = append(b.failed, i)
			if b.first == nil {
				b.first = err
			}
			b.mu.Unlock()
		}
		b.wg.Done()
	})
}

// wait waits for Kafka to confirm every record, and says which were not
// written when one was not; when a confirmation does not come in time it
// calls lost, which replaces the client (records already sent outlive the
// context).
func (b *bundleWrites) wait(ctx context.Context, topic, brokers string, lost func()) error {
	defer b.cancel()
	done := make(chan struct{})
	go func() { b.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(b.timeout + 10*time.Second):
		lost()
		return fmt.Errorf("kafkaio: write of %d records to topic %s on %s: no confirmation within %v; %s",
			len(b.pending), topic, brokers, b.timeout+10*time.Second, notWritten(b.pending, nil))
	case <-ctx.Done():
		return ctx.Err()
	}
	if len(b.failed) > 0 {
		return fmt.Errorf("kafkaio: write of %d of %d records to topic %s on %s failed: %v; %s",
			len(b.failed), len(b.pending), topic, brokers, b.first, notWritten(b.pending, b.failed))
	}
	return nil
}

// emit emits the written records and counts them.
func (b *bundleWrites) emit(ctx context.Context, emit func(Record)) {
	var dead int64
	for _, r := range b.pending {
		if _, ok := r.Header(headerReason); ok {
			dead++
		}
		emit(r)
	}
	cWritten.Inc(ctx, int64(len(b.pending))-dead)
	cDeadLettered.Inc(ctx, dead)
	b.pending = b.pending[:0]
}

func (fn *writeFn) timeout() time.Duration { return time.Duration(fn.TimeoutMs) * time.Millisecond }

func (fn *writeFn) Setup() error {
	var err error
	fn.cl, err = kgo.NewClient(kgo.SeedBrokers(splitBrokers(fn.Brokers)...),
		kgo.DefaultProduceTopic(fn.Topic),
		kgo.ProducerLinger(5*time.Millisecond),
		// A missing topic fails the write instead of waiting for it.
		kgo.UnknownTopicRetries(2))
	return err
}

func (fn *writeFn) Teardown() {
	if fn.cl != nil {
		fn.cl.Close()
	}
}

func (fn *writeFn) StartBundle(context.Context, func(Record)) { fn.bundle.start(fn.timeout()) }

func (fn *writeFn) ProcessElement(_ context.Context, r Record, _ func(Record)) {
	fn.bundle.produce(fn.cl, r, fn.Topic)
}

func (fn *writeFn) FinishBundle(ctx context.Context, emit func(Record)) error {
	if err := fn.bundle.wait(ctx, fn.Topic, fn.Brokers, func() { fn.cl.Close(); fn.Setup() }); err != nil {
		return err
	}
	fn.bundle.emit(ctx, emit)
	return nil
}

// notWritten says what a failed bundle did not write (the records at
// idx, or all of them when idx is nil), by where they were read.
func notWritten(recs []Record, idx []int) string {
	if idx == nil {
		idx = make([]int, len(recs))
		for i := range idx {
			idx[i] = i
		}
	}
	type key struct {
		topic     string
		partition int32
	}
	ranges := map[key][2]int64{}
	counts := map[key]int{}
	for _, i := range idx {
		r := recs[i]
		k := key{r.Topic, r.Partition}
		rg, ok := ranges[k]
		if !ok {
			rg = [2]int64{r.Offset, r.Offset}
		}
		ranges[k] = [2]int64{min(rg[0], r.Offset), max(rg[1], r.Offset)}
		counts[k]++
	}
	keys := make([]key, 0, len(ranges))
	for k := range ranges {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int {
		if c := strings.Compare(a.topic, b.topic); c != 0 {
			return c
		}
		return int(a.partition - b.partition)
	})
	var parts []string
	for _, k := range keys {
		rg := ranges[k]
		parts = append(parts, fmt.Sprintf("%d read from %s partition %d offsets %d-%d", counts[k], k.topic, k.partition, rg[0], rg[1]))
	}
	return fmt.Sprintf("not written: %s; the bundle fails, so none of its records is marked safe and their offsets are not committed: they are read again by the next run (records of the bundle that were written are then written again)",
		strings.Join(parts, ", "))
}

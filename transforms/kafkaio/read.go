package kafkaio

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

func init() {
	beam.RegisterType(reflect.TypeFor[partition]())
}

// Read returns the unbounded PCollection<Record> of topic on brokers
// (host:port, comma-separated), each stamped with its record timestamp:
// one reader per partition, listed when the job starts (and again with
// WatchPartitions). Read commits nothing itself: with Group, Commit
// commits a record's offset once it and every record before it in its
// partition are safe (see the package doc). It panics on invalid options;
// TryRead returns the error instead.
func Read(s beam.Scope, brokers, topic string, opts ...Option) beam.PCollection {
	col, err := TryRead(s, brokers, topic, opts...)
	if err != nil {
		panic(err)
	}
	return col
}

// TryRead is Read returning construction errors.
func TryRead(s beam.Scope, brokers, topic string, opts ...Option) (beam.PCollection, error) {
	cfg, err := newConfig("kafkaio.Read", readOptions, opts, checkBrokers(brokers), checkTopic(topic))
	if err != nil {
		return beam.PCollection{}, err
	}
	s = s.Scope("kafkaio.Read")
	reading := cfg.Reading()
	var startAtMs int64
	if !cfg.startAt.IsZero() {
		startAtMs = cfg.startAt.UnixMilli()
	}
	var list any = &listFn{Brokers: brokers, Topic: topic, Group: cfg.group, Start: int(cfg.start), StartAtMs: startAtMs}
	if cfg.watch > 0 {
		list = &watchFn{Brokers: brokers, Topic: topic, Group: cfg.group, Start: int(cfg.start), StartAtMs: startAtMs,
			IntervalMs: cfg.watch.Milliseconds(), Reading: reading}
	}
	parts := beam.ParDo(s, list, beam.Impulse(s))
	return beam.ParDo(s, &readFn{
		Brokers: brokers, Topic: topic, Group: cfg.group, Reading: reading, MaxInFlight: cfg.maxInFlight, Watched: cfg.watch > 0,
	}, parts), nil
}

// partition is a reader's element: a partition and where it starts.
type partition struct {
	Topic     string
	Partition int32
	Start     int64
}

// listFn lists the topic's partitions and where each starts, once.
type listFn struct {
	Brokers   string
	Topic     string
	Group     string
	Start     int
	StartAtMs int64 // StartAt, when not 0

	adm *kadm.Client
}

func (fn *listFn) Setup() error {
	var err error
	fn.adm, err = adminFor(fn.Brokers)
	return err
}

func (fn *listFn) ProcessElement(ctx context.Context, _ []byte, emit func(partition)) error {
	starts, err := startOffsets(ctx, fn.adm, fn.Brokers, fn.Topic, fn.Group, start(fn.Start), fn.StartAtMs)
	if err != nil {
		return err
	}
	for p, o := range starts {
		emit(partition{Topic: fn.Topic, Partition: p, Start: o})
	}
	return nil
}

// startOffsets is where each partition of topic starts.
func startOffsets(ctx context.Context, adm *kadm.Client, brokers, topic, group string, from start, atMs int64) (map[int32]int64, error) {
	where := fmt.Sprintf("topic %s on %s", topic, brokers)
	list := func(f func(context.Context, ...string) (kadm.ListedOffsets, error)) (map[int32]int64, error) {
		l, err := f(ctx, topic)
		if err == nil {
			err = l.Error()
		}
		if errors.Is(err, kerr.UnknownTopicOrPartition) {
			return nil, fmt.Errorf("kafkaio: %s does not exist", where)
		}
		if err != nil {
			return nil, fmt.Errorf("kafkaio: listing the offsets of %s: %w", where, err)
		}
		out := map[int32]int64{}
		for p, o := range l[topic] {
			out[p] = o.Offset
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("kafkaio: %s does not exist", where)
		}
		return out, nil
	}
	if atMs != 0 {
		return list(func(ctx context.Context, t ...string) (kadm.ListedOffsets, error) {
			return adm.ListOffsetsAfterMilli(ctx, atMs, t...)
		})
	}
	switch from {
	case fromLatest:
		return list(adm.ListEndOffsets)
	case fromEarliest:
		return list(adm.ListStartOffsets)
	}
	earliest, err := list(adm.ListStartOffsets)
	if err != nil {
		return nil, err
	}
	resp, err := fetchOffsets(ctx, adm, group)
	if err != nil {
		return nil, fmt.Errorf("kafkaio: fetching the committed offsets of group %s on %s: %w", group, brokers, err)
	}
	for p, o := range resp[topic] {
		first, ok := earliest[p]
		if !ok || o.At < 0 {
			continue
		}
		if o.At < first {
			log.Warnf(ctx, "kafkaio: group %s committed offset %d of %s partition %d, which starts at %d now: %d records were deleted (retention) before the group read them",
				group, o.At, topic, p, first, first-o.At)
		}
		earliest[p] = max(o.At, first)
	}
	return earliest, nil
}

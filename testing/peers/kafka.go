package peers

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/beamdedup/beamdedup/internal/jobrun"
	"github.com/beamdedup/beamdedup/pipelines/orders"
	"github.com/beamdedup/beamdedup/pipelines/streaming"
	"github.com/beamdedup/beamdedup/testing/kafkatest"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/kafkaio"
)

// Seed 001 on a Kafka broker, side by side (docs/kafka.md): every side
// reads the same input topic and writes the first record of each order to
// an output topic of its own, created with LogAppendTime, so that each is
// timed by the broker's clock, to the append of its last output record.

// KafkaTiming is one side's run on a broker.
type KafkaTiming struct {
	Side     string
	Records  int     // input records
	Out      int     // output records
	Distinct int     // distinct keys among them
	Seconds  float64 // from the job's start to the last output record's append
	Wall     float64 // the job's own wall time, start-up to end (ours: with its idle stop)
	Plan     string  // Flink SQL: its plan's Deduplicate node
}

// RecordsPerSecond is the input's records over Seconds.
func (k KafkaTiming) RecordsPerSecond() float64 {
	if k.Seconds <= 0 {
		return 0
	}
	return float64(k.Records) / k.Seconds
}

func (k KafkaTiming) String() string {
	s := fmt.Sprintf("%s records=%d out=%d distinct=%d seconds=%.3f records_per_s=%.0f wall_seconds=%.3f",
		k.Side, k.Records, k.Out, k.Distinct, k.Seconds, k.RecordsPerSecond(), k.Wall)
	if k.Plan != "" {
		s += " plan=" + k.Plan
	}
	return s
}

// ReadOrdersFile reads a peerdata orders file (JSON Lines).
func ReadOrdersFile(path string) ([]orders.Order, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []orders.Order
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		var o orders.Order
		if err := json.Unmarshal(sc.Bytes(), &o); err != nil {
			return nil, fmt.Errorf("peers: %s line %d: %w", path, n, err)
		}
		out = append(out, o)
	}
	return out, sc.Err()
}

// CreateOutputTopics creates topics with two partitions and LogAppendTime
// (the broker's clock stamps each record), so that a side's last write
// can be read from the topic.
func CreateOutputTopics(ctx context.Context, brokers string, topics ...string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	lat := "LogAppendTime"
	for _, t := range topics {
		resp, err := adm.CreateTopic(ctx, 2, 1, map[string]*string{"message.timestamp.type": &lat}, t)
		if err == nil {
			err = resp.Err
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("peers: creating topic %s on %s: %w", t, brokers, err)
		}
	}
	// A topic just created is not yet in every metadata answer.
	for {
		d, err := adm.ListTopics(ctx, topics...)
		if err == nil && len(d) == len(topics) && d.Error() == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("peers: topics %v on %s not listed: %w", topics, brokers, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// OutputOf reads topic's committed records (kafkatest.EachCommitted) and
// returns how many, its
// distinct keys and the newest record timestamp (the broker's append time
// on a LogAppendTime topic).
func OutputOf(ctx context.Context, brokers, topic string) (records, distinct int, last time.Time, err error) {
	keys := map[string]struct{}{}
	err = kafkatest.EachCommitted(ctx, brokers, topic, func(r *kgo.Record) {
		records++
		keys[string(r.Key)] = struct{}{}
		if r.Timestamp.After(last) {
			last = r.Timestamp
		}
	})
	if err != nil {
		err = fmt.Errorf("peers: %w", err)
	}
	return records, len(keys), last, err
}

// FlinkSQLKafka runs the Flink SQL peer's seed 001 on Kafka (FlinkSqlPeer
// kafka): from topic in into topic out, group group, with parallelism.
func FlinkSQLKafka(ctx context.Context, brokers, in, out, group string, records, parallelism int) (KafkaTiming, error) {
	res, err := Run(ctx, FlinkSQL, FlinkSQLMain, "kafka", brokers, in, out, group, strconv.Itoa(parallelism))
	if err != nil {
		return KafkaTiming{}, err
	}
	f := res["kafka_keep_first"]
	startMs, err1 := strconv.ParseInt(f["start_ms"], 10, 64)
	wall, err2 := strconv.ParseFloat(f["seconds"], 64)
	if err1 != nil || err2 != nil {
		return KafkaTiming{}, fmt.Errorf("peers: the Flink SQL peer's result line: %v", res)
	}
	t, err := timed(ctx, "flink_sql_kafka", brokers, out, records, time.UnixMilli(startMs), wall)
	t.Plan = f["plan"]
	return t, err
}

// OursKafka runs seed 001's pipeline (pipelines/streaming over Kafka, runjob
// --pipeline=kafka) from topic in into out (dead letters into dead) on the
// job job, with the options of how, until every partition was read to its
// end and idle for idleStop.
func OursKafka(ctx context.Context, job jobrun.Options, brokers, in, out, dead, group string, records int, idleStop time.Duration, how OursKafkaOptions) (KafkaTiming, error) {
	start := time.Now()
	src := streaming.Kafka{Brokers: brokers, InputTopic: in, OutputTopic: out, DeadLetterTopic: dead, Group: group, Read: how.Read, Write: how.Write}
	res, err := streaming.Run(ctx, job, src, streaming.RunConfig{
		// As runjob with --idle_stop: Prism keeps a job with pending
		// processing-time cleanup timers alive until they fire.
		Config:     streaming.Config{Dedup: append([]dedup.Option{dedup.CleanupTimers(false)}, how.Dedup...)},
		IdleStop:   idleStop,
		Savepoints: how.Savepoints,
	})
	if err != nil {
		return KafkaTiming{}, err
	}
	if how.Savepoints != "" {
		// On Flink the counters come at the job's end, and a job stopped
		// with a savepoint has none: its output is checked instead.
		return timed(ctx, "ours_kafka_flink", brokers, out, records, start, time.Since(start).Seconds())
	}
	if res.Read != int64(records) {
		return KafkaTiming{}, fmt.Errorf("peers: our job read %d records, want %d", res.Read, records)
	}
	return timed(ctx, "ours_kafka_prism", brokers, out, records, start, time.Since(start).Seconds())
}

// OursKafkaOptions are the options of our side: its source's, its writes'
// and its KeepFirst's.
type OursKafkaOptions struct {
	Read, Write []kafkaio.Option
	Dedup       []dedup.Option
	// Savepoints is, on a Flink cluster, its savepoint directory: the run
	// ends with a stop with a savepoint once the group was committed to the
	// end (streaming.RunConfig.Savepoints).
	Savepoints string
}

// timed reads a side's output topic and times it from start to its last
// append.
func timed(ctx context.Context, side, brokers, out string, records int, start time.Time, wall float64) (KafkaTiming, error) {
	n, distinct, last, err := OutputOf(ctx, brokers, out)
	if err != nil {
		return KafkaTiming{}, err
	}
	return KafkaTiming{Side: side, Records: records, Out: n, Distinct: distinct, Seconds: last.Sub(start).Seconds(), Wall: wall}, nil
}

package streaming

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/beamdedup/beamdedup/internal/jobrun"
	"github.com/beamdedup/beamdedup/internal/unbounded"
	"github.com/beamdedup/beamdedup/transforms/kafkaio"
)

// Kafka is a Kafka topic read with a consumer group, as seed 001 reads
// its two-partition topic of orders: each record's offset is committed for
// the group once it is safe (kafkaio.Commit), and only once every record
// before it in its partition is.
type Kafka struct {
	// Brokers are the bootstrap brokers, host:port, comma-separated.
	Brokers string
	// InputTopic, OutputTopic and DeadLetterTopic are required, three
	// topics; DeadLetterTopic receives what does not decode, with its
	// bytes.
	InputTopic, OutputTopic, DeadLetterTopic string
	// Group is the consumer group whose offsets the pipeline starts from
	// and commits (required).
	Group string
	// Read adds options of the source (IdleStop, MaxInFlight, ...).
	Read []kafkaio.Option
	// Write adds options of the writes (WriteTimeout).
	Write []kafkaio.Option
}

// DefaultKafkaStateTTL is how long KeepFirst remembers a key of a Kafka
// stream (processing time) unless Config.Dedup says otherwise: seed 001's
// assumption that duplicates arrive within 2 hours.
const DefaultKafkaStateTTL = 2 * time.Hour

func (k Kafka) spec() spec {
	return spec{name: "kafka", uid: "kafka-dedup", stateTTL: DefaultKafkaStateTTL,
		output: k.OutputTopic, dead: k.DeadLetterTopic, input: k.InputTopic,
		live: "Kafka source",
		hint: fmt.Sprintf("the job waits on Kafka (brokers %s) or on a step of yours: check that the brokers answer, and that no step blocks", k.Brokers),
		noun: "records", write: "write", written: "written", settled: "safe", settledVerb: "committed"}
}

func (k Kafka) check(bool) error {
	var missing []string
	for _, f := range []struct{ name, v string }{{"Brokers", k.Brokers}, {"InputTopic", k.InputTopic},
		{"OutputTopic", k.OutputTopic}, {"DeadLetterTopic", k.DeadLetterTopic}, {"Group", k.Group}} {
		if f.v == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("kafka: Kafka needs %v", missing)
	}
	if k.OutputTopic == k.InputTopic || k.DeadLetterTopic == k.InputTopic || k.OutputTopic == k.DeadLetterTopic {
		return errors.New("kafka: InputTopic, OutputTopic and DeadLetterTopic must be three topics")
	}
	return nil
}

func (k Kafka) read(s beam.Scope, ctl *unbounded.Control, idleStop time.Duration) (beam.PCollection, error) {
	opts := append([]kafkaio.Option{kafkaio.Group(k.Group)}, k.Read...)
	return kafkaio.TryRead(s, k.Brokers, k.InputTopic, append(opts, runOptions(ctl, idleStop, kafkaio.IdleStop)...)...)
}

func (k Kafka) write(s beam.Scope, topic string, col beam.PCollection) (beam.PCollection, error) {
	return kafkaio.TryWrite(s, k.Brokers, topic, col, k.Write...)
}

func (k Kafka) settle(s beam.Scope, written, dropped, dead beam.PCollection) error {
	return kafkaio.TryCommit(s, k.Brokers, k.Group, written, dropped, dead)
}

func (k Kafka) preflight(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return CheckTopics(ctx, k.Brokers, k.InputTopic, k.OutputTopic, k.DeadLetterTopic)
}

func (Kafka) elements() elements[kafkaio.Record] { return elementsOf[kafkaio.Record]() }

func (Kafka) counts(pr beam.PipelineResult) counts {
	c := kafkaio.ReadCounters(pr)
	return counts{read: c.Read, settled: c.Safe, written: c.Written + c.DeadLettered}
}

// finish reads the group's committed offsets and the topic's end offsets.
func (k Kafka) finish(ctx context.Context, res *Result) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var err error
	res.Committed, res.End, err = Offsets(ctx, k.Brokers, k.Group, k.InputTopic)
	return err
}

func (Kafka) explain(*jobrun.Stall, bool, bool) {}

// settledToEnd reports whether the group is committed at the end of every
// partition: every record there was written, dead-lettered or dropped.
func (k Kafka) settledToEnd(ctx context.Context) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	committed, end, err := Offsets(ctx, k.Brokers, k.Group, k.InputTopic)
	if err != nil {
		return false, err
	}
	for p, e := range end {
		if committed[p] != e {
			return false, nil
		}
	}
	return true, nil
}

// CheckTopics looks the topics up on brokers, so that a job does not start
// against one that is not there, and returns the first one's partition
// count. The errors name the topic and the brokers.
func CheckTopics(ctx context.Context, brokers string, topics ...string) (partitions int, err error) {
	adm, closeAdm, err := admin(brokers)
	if err != nil {
		return 0, err
	}
	defer closeAdm()
	details, err := adm.ListTopics(ctx, topics...)
	if err != nil {
		return 0, fmt.Errorf("kafka: looking up topics %v on %s: %w", topics, brokers, err)
	}
	for i, t := range topics {
		d, ok := details[t]
		if !ok || d.Err != nil {
			return 0, fmt.Errorf("kafka: topic %s does not exist on %s", t, brokers)
		}
		if i == 0 {
			partitions = len(d.Partitions)
		}
	}
	return partitions, nil
}

// Offsets are group's committed offsets of topic and topic's end offsets,
// by partition.
func Offsets(ctx context.Context, brokers, group, topic string) (committed, end map[int32]int64, err error) {
	adm, closeAdm, err := admin(brokers)
	if err != nil {
		return nil, nil, err
	}
	defer closeAdm()
	resp, err := adm.FetchOffsets(ctx, group)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("kafka: fetching the offsets of group %s on %s: %w", group, brokers, err)
	}
	committed = map[int32]int64{}
	for p, o := range resp[topic] {
		committed[p] = o.At
	}
	l, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = l.Error()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("kafka: listing the end offsets of %s on %s: %w", topic, brokers, err)
	}
	end = map[int32]int64{}
	for p, o := range l[topic] {
		end[p] = o.Offset
	}
	return committed, end, nil
}

func admin(brokers string) (*kadm.Client, func(), error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seedsOf(brokers)...))
	if err != nil {
		return nil, nil, fmt.Errorf("kafka: a client of %s: %w", brokers, err)
	}
	return kadm.NewClient(cl), cl.Close, nil
}

// seedsOf splits a comma-separated broker list.
func seedsOf(brokers string) []string {
	var seeds []string
	for b := range strings.SplitSeq(brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			seeds = append(seeds, b)
		}
	}
	return seeds
}

package kafkaio

import (
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/beamdedup/beamdedup/internal/unbounded"
)

// Option configures Read, Write and Commit; each option's doc says which
// take it. TryRead, TryWrite and TryCommit return every mistake at once.
type Option func(*config)

// start says where Read starts in each partition.
type start int

const (
	fromCommitted start = iota // the group's committed offset, else the earliest
	fromEarliest
	fromLatest
)

// config is what the options set.
type config struct {
	unbounded.Config

	group        string
	start        start
	startSet     string // the option that set start, if one did
	startAt      time.Time
	maxInFlight  int
	watch        time.Duration
	writeTimeout time.Duration
	txnID        string
}

var (
	readOptions = []string{"Group", "FromEarliest", "FromLatest", "StartAt", "MaxBundleDuration", "MaxBundleRecords", "IdleStop",
		"WatermarkLag", "MaxInFlight", "WatchPartitions", unbounded.ControlOptionName}
	writeOptions = []string{"WriteTimeout", "Transactional"}
)

// newConfig applies opts for transform, which takes the options allowed;
// more are errors of its own arguments.
func newConfig(transform string, allowed []string, opts []Option, more ...error) (config, error) {
	c := config{
		Config:       unbounded.Config{MaxBundle: time.Second, MaxElements: 10000, WatermarkLag: 2 * time.Second},
		maxInFlight:  20000,
		writeTimeout: 30 * time.Second,
	}
	unbounded.Apply(&c, &c.Record, opts)
	if c.startSet == "" && c.startAt.IsZero() && c.group == "" {
		c.start = fromEarliest
	}
	if c.startSet != "" && !c.startAt.IsZero() {
		c.Errorf("%s and StartAt are both given; want one", c.startSet)
	}
	return c, c.Check(transform, allowed, more...)
}

// Group names the consumer group whose committed offsets Read starts from
// and for which Commit commits what is safe. Without it Read commits
// nothing and starts at the earliest offsets. Read.
func Group(name string) Option {
	return func(c *config) {
		c.Set("Group")
		if name == "" {
			c.Errorf("Group(\"\"): want a group name")
		}
		c.group = name
	}
}

// FromEarliest starts Read at the first offset each partition still
// holds, whatever the group committed (the default without Group; with
// it, the group's committed offsets, else the earliest). Read.
func FromEarliest() Option { return startFrom("FromEarliest", fromEarliest) }

// FromLatest starts Read at the end of each partition: only records
// written after the start. Read.
func FromLatest() Option { return startFrom("FromLatest", fromLatest) }

func startFrom(option string, s start) Option {
	return func(c *config) {
		c.Set(option)
		if c.startSet != "" && c.startSet != option {
			c.Errorf("%s and %s are both given; want one", c.startSet, option)
		}
		c.start, c.startSet = s, option
	}
}

// StartAt starts each partition at its first record whose timestamp is at
// or after t (at its end when it has none). Read.
func StartAt(t time.Time) Option {
	return func(c *config) {
		c.Set("StartAt")
		if t.IsZero() {
			c.Errorf("StartAt(zero time): want a time")
		}
		c.startAt = t
	}
}

// MaxBundleDuration bounds how long one bundle of a partition's reader
// reads before it checkpoints (default 1s), and so the latency. Read.
func MaxBundleDuration(d time.Duration) Option { return func(c *config) { c.SetMaxBundle(d) } }

// MaxBundleRecords bounds how many records one bundle of a partition's
// reader emits (default 10,000). Read.
func MaxBundleRecords(n int) Option {
	return func(c *config) { c.SetMaxElements("MaxBundleRecords", n) }
}

// IdleStop makes each partition's reader finish once it has read to the
// partition's end and no record came for d, which ends the pipeline once
// the rest is done. 0 (the default) reads forever. A broker that does not
// answer is not idle. Read.
func IdleStop(d time.Duration) Option { return func(c *config) { c.SetIdleStop(d) } }

// WatermarkLag is how far a partition's watermark stays behind the latest
// record timestamp read, and, at the partition's end, behind the wall
// clock (default 2s). Read.
func WatermarkLag(d time.Duration) Option { return func(c *config) { c.SetWatermarkLag(d) } }

// MaxInFlight bounds, with Group, how far each partition's reader reads
// ahead of its group's committed offset (default 20,000 records; 0: no
// bound), and so what a crash makes the next run read again. A reader
// held at the bound for a minute while the offset does not move warns and
// reads on without it until the offset moves. Read.
func MaxInFlight(n int) Option {
	return func(c *config) {
		c.Set("MaxInFlight")
		if n < 0 {
			c.Errorf("MaxInFlight(%d): want 0 (no bound) or a positive number", n)
		}
		c.maxInFlight = n
	}
}

// WatchPartitions makes Read list the topic's partitions again every d
// and read each partition added since (default: listed once, at the
// start). An added partition starts at the group's committed offset, else
// at its first, whatever the start options say. With IdleStop the watch
// ends once every reader in this process has ended and no partition was
// added for the IdleStop duration. Read.
func WatchPartitions(d time.Duration) Option {
	return func(c *config) {
		c.Set("WatchPartitions")
		if d <= 0 {
			c.Errorf("WatchPartitions(%v): want a positive duration", d)
		}
		c.watch = d
	}
}

// WriteTimeout bounds how long a record may wait to be written, retries
// included (default 30s); past it the bundle fails. Write.
func WriteTimeout(d time.Duration) Option {
	return func(c *config) {
		c.Set("WriteTimeout")
		if d <= 0 {
			c.Errorf("WriteTimeout(%v): want a positive duration", d)
		}
		c.writeTimeout = d
	}
}

// Transactional makes Write write with Kafka transactions, under
// transactional ids that begin with id (unique to the Write across the
// jobs that write to the cluster, and the same when a job is restored), so
// that a consumer reading committed records (isolation.level
// read_committed) sees each record once although a failure made the job
// write it again. Write.
//
// On a Flink cluster, run through the project's job server (which tells
// its workers the job's name and the cluster's REST address), each
// bundle's records are written in a transaction that is committed once a
// checkpoint taken after the bundle has completed: a job restored from
// that checkpoint commits it if the job that wrote it did not, and aborts
// those its ids wrote after it, whose input it reads again. Records are
// then visible a checkpoint interval after they are written, and a job
// must be restored within 15 minutes (the transactions' timeout) of a
// failure, else Kafka aborts what it had not committed. Elsewhere (Prism,
// an embedded Flink cluster) a bundle's transaction is committed at its
// end.
func Transactional(id string) Option {
	return func(c *config) {
		c.Set("Transactional")
		if err := checkTopic(id); id == "" || err != nil {
			c.Errorf("Transactional(%q): want an id of ASCII letters, digits, '.', '_' and '-'", id)
		}
		c.txnID = id
	}
}

// checkBrokers requires a comma-separated list of host:port.
func checkBrokers(brokers string) error {
	if strings.TrimSpace(brokers) == "" {
		return fmt.Errorf("no brokers; want host:port[,host:port...]")
	}
	for _, b := range splitBrokers(brokers) {
		if _, _, err := net.SplitHostPort(b); err != nil {
			return fmt.Errorf("broker %q is not host:port", b)
		}
	}
	return nil
}

func splitBrokers(brokers string) []string {
	var out []string
	for b := range strings.SplitSeq(brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

// checkTopic refuses a name Kafka would refuse.
func checkTopic(topic string) error {
	if topic == "" {
		return fmt.Errorf("no topic")
	}
	if len(topic) > 249 || topic == "." || topic == ".." || strings.Trim(topic, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != "" {
		return fmt.Errorf("topic %q is not a valid Kafka topic name (ASCII letters, digits, '.', '_', '-'; at most 249)", topic)
	}
	return nil
}

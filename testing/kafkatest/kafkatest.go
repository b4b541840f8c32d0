// Package kafkatest runs a real Apache Kafka broker for tests, benchmarks
// and by hand: Kafka 4.4 in KRaft mode (a combined broker and controller,
// no ZooKeeper), from the kafka_2.13 artifact on Maven Central. Start
// formats a storage directory and starts kafka.Kafka on two free loopback
// ports, with a small heap; topics are created explicitly (the broker does
// not create them on first use), two partitions unless told otherwise.
//
//	b := kafkatest.Shared(t)  // the test binary's broker: b.Addr, "127.0.0.1:PORT"
//	topic := b.NewTopic(t, 2) // a topic of the test's own, deleted after it
//
// The classpath is resolved with mvn once per machine and cached
// (internal/maven). Without java or mvn a test is skipped, unless the
// CI environment variable is set: then it fails (proctest.SkipOrFail). A
// broker dies with the process that started it, and a watcher removes
// its storage then (proctest.AfterExit). cmd/kafkabroker serves a broker
// until Ctrl-C.
package kafkatest

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/beamdedup/beamdedup/internal/maven"
	"github.com/beamdedup/beamdedup/testing/jobservertest"
	"github.com/beamdedup/beamdedup/testing/proctest"
)

// KafkaVersion is the Kafka release of the broker (broker/pom.xml).
const KafkaVersion = "4.4.0"

//go:embed broker/pom.xml
var pom []byte

// Project is the broker's Maven project (kafka_2.13 and a log binding).
var Project = &maven.Project{Name: "kafka-" + KafkaVersion, Pom: pom}

// StartTimeout bounds formatting the storage and the wait for a started
// broker to serve.
var StartTimeout = 2 * time.Minute

// Options configure Start. The zero value is a broker with a 512 MB heap.
type Options struct {
	// Heap is the JVM's -Xmx (default "512m").
	Heap string
}

// Broker is a running (or stopped) broker and its storage.
type Broker struct {
	// Addr is its bootstrap address, "127.0.0.1:PORT", for a client's
	// seed brokers.
	Addr string
	// Dir holds its configuration, storage (data/) and log (broker.log).
	Dir string

	args   []string
	jvm    atomic.Pointer[proctest.Proc] // the JVM of the last start
	closed atomic.Bool
	topics atomic.Int64
	admin  *kadm.Client
}

// ready is the line the broker logs once it serves (log4j2.properties
// keeps that logger at info).
const ready = "Kafka Server started"

const log4j = `status = error
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.out.ref = out
logger.ready.name = kafka.server.KafkaRaftServer
logger.ready.level = info
`

// serverProperties is a single-node KRaft broker on loopback, sized for a
// small shared machine: internal topics with one partition and one
// replica, few threads, no topic created on first use, and no retention:
// the tests write records with the seed's timestamps, months old, which
// Kafka's default retention (7 days by record timestamp) deletes at its
// next check.
func serverProperties(dir string, port, controller int) string {
	return fmt.Sprintf(`process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:%[3]d
listeners=PLAINTEXT://127.0.0.1:%[2]d,CONTROLLER://127.0.0.1:%[3]d
advertised.listeners=PLAINTEXT://127.0.0.1:%[2]d
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=%[1]s
num.partitions=2
auto.create.topics.enable=false
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
num.network.threads=2
num.io.threads=2
background.threads=2
num.recovery.threads.per.data.dir=1
log.cleaner.threads=1
log.retention.ms=-1
log.retention.bytes=-1
`, filepath.Join(dir, "data"), port, controller)
}

// Start formats a storage directory and starts a broker on free loopback
// ports; it returns once the broker serves. The caller ends it (Close);
// it also dies with the process that started it.
func Start(ctx context.Context, opts Options) (*Broker, error) {
	if opts.Heap == "" {
		opts.Heap = "512m"
	}
	cp, err := Project.Classpath()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "kafkatest-")
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Broker, error) {
		os.RemoveAll(dir)
		return nil, err
	}
	port, err := jobservertest.FreePort()
	if err != nil {
		return fail(err)
	}
	controller, err := jobservertest.FreePort()
	if err != nil {
		return fail(err)
	}
	props := filepath.Join(dir, "server.properties")
	if err := os.WriteFile(props, []byte(serverProperties(dir, port, controller)), 0o644); err != nil {
		return fail(err)
	}
	logConf := filepath.Join(dir, "log4j2.properties")
	if err := os.WriteFile(logConf, []byte(log4j), 0o644); err != nil {
		return fail(err)
	}
	// A small JVM: the machine is shared, the broker's load is a test's.
	jvm := []string{"-Xmx" + opts.Heap, "-Xms64m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData",
		"-Djava.awt.headless=true", "-Dlog4j2.configurationFile=" + logConf, "-cp", cp}
	fctx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()
	format := exec.CommandContext(fctx, "java", append(append([]string{}, jvm...),
		"kafka.tools.StorageTool", "format", "--cluster-id="+newClusterID(), "-c", props)...)
	if out, err := format.CombinedOutput(); err != nil {
		return fail(fmt.Errorf("kafkatest: formatting the broker's storage: %v\n%s", err, out))
	}
	b := &Broker{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Dir: dir,
		args: append(append([]string{}, jvm...), "kafka.Kafka", props)}
	if err := b.launch(fctx); err != nil {
		return fail(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr))
	if err == nil {
		b.admin = kadm.NewClient(cl)
		err = proctest.AfterExit(watcherScript, b.Dir)
	}
	if err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// watcherScript removes the broker's directory once the process that
// started it ($1) has exited (the JVM dies with it) or the directory is
// gone.
const watcherScript = `parent=$1; dir=$2
while kill -0 "$parent" 2>/dev/null && [ -d "$dir" ]; do sleep 1; done
sleep 1
rm -rf "$dir"
`

// newClusterID is a new broker's KRaft cluster id (clusterID; a test's own).
var newClusterID = clusterID

// clusterID is a random KRaft cluster id: 16 bytes, base64url unpadded.
// One in 64 begins with '-', which the storage tool's parser takes for an
// option unless it is given as --cluster-id=ID.
func clusterID() string {
	var b [16]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// launch starts the JVM on the formatted storage and waits until it
// serves.
func (b *Broker) launch(ctx context.Context) error {
	cmd := exec.Command("java", b.args...)
	cmd.Dir = b.Dir
	p, err := proctest.Start(cmd, b.LogFile())
	if err != nil {
		return err
	}
	b.jvm.Store(p)
	if _, err := p.AwaitLine(ctx, ready); err != nil {
		p.Kill()
		return fmt.Errorf("kafkatest: the broker: %v", err)
	}
	return nil
}

// LogFile is the path of the broker's log.
func (b *Broker) LogFile() string { return filepath.Join(b.Dir, "broker.log") }

// Output is what the broker logged so far (warnings and errors, and a line
// per start).
func (b *Broker) Output() string {
	out, _ := os.ReadFile(b.LogFile())
	return string(out)
}

// Kill kills the broker at once (SIGKILL), as a crash would; its storage
// stays for Restart.
func (b *Broker) Kill() {
	if p := b.jvm.Load(); p != nil {
		p.Kill()
	}
}

// Stop stops the broker (SIGTERM: a controlled shutdown) and waits for it,
// at most 30s before it kills it; its storage stays for Restart.
func (b *Broker) Stop() {
	p := b.jvm.Load()
	if p == nil {
		return
	}
	p.Signal(syscall.SIGTERM)
	select {
	case <-p.Done():
	case <-time.After(30 * time.Second):
		p.Kill()
	}
}

// Running reports whether the broker's process runs.
func (b *Broker) Running() bool {
	p := b.jvm.Load()
	return p != nil && p.Running()
}

// Restart starts a stopped (or killed) broker again, on its storage and
// its ports, and returns once it serves.
func (b *Broker) Restart(ctx context.Context) error {
	if b.Running() {
		return errors.New("kafkatest: Restart of a broker that runs")
	}
	ctx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()
	return b.launch(ctx)
}

// Close kills the broker and removes its storage. It may be called more
// than once.
func (b *Broker) Close() {
	if b.closed.Swap(true) {
		return
	}
	if b.admin != nil {
		b.admin.Close()
	}
	b.Kill()
	os.RemoveAll(b.Dir)
}

// Admin is the broker's admin client, made by Start and closed with the
// broker; the error is always nil.
func (b *Broker) Admin() (*kadm.Client, error) { return b.admin, nil }

// CreateTopic creates topic with partitions partitions (one replica) and
// returns once the broker lists it with a leader for every partition (a
// client that asks at once may otherwise be told it does not exist).
func (b *Broker) CreateTopic(ctx context.Context, topic string, partitions int) error {
	resp, err := b.admin.CreateTopic(ctx, int32(partitions), 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("kafkatest: creating topic %s: %w", topic, err)
	}
	return b.waitListed(ctx, topic, partitions)
}

// waitListed waits until the broker's metadata lists topic with n
// partitions, each with a leader.
func (b *Broker) waitListed(ctx context.Context, topic string, n int) error {
	for {
		details, err := b.admin.ListTopics(ctx, topic)
		if d, ok := details[topic]; err == nil && ok && d.Err == nil && len(d.Partitions) == n {
			led := 0
			for _, p := range d.Partitions {
				if p.Err == nil && p.Leader >= 0 {
					led++
				}
			}
			if led == n {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kafkatest: topic %s not listed with %d partitions: %w", topic, n, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// DeleteTopic deletes topic.
func (b *Broker) DeleteTopic(ctx context.Context, topic string) error {
	resp, err := b.admin.DeleteTopic(ctx, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("kafkatest: deleting topic %s: %w", topic, err)
	}
	return nil
}

// AddPartitions adds n partitions to topic.
func (b *Broker) AddPartitions(ctx context.Context, topic string, n int) error {
	before, err := b.EndOffsets(ctx, topic)
	if err != nil {
		return err
	}
	resp, err := b.admin.CreatePartitions(ctx, n, topic)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return fmt.Errorf("kafkatest: adding %d partitions to %s: %w", n, topic, err)
	}
	return b.waitListed(ctx, topic, len(before)+n)
}

// Committed returns the offsets group has committed on topic, by
// partition (partitions without a commit are absent).
func (b *Broker) Committed(ctx context.Context, group, topic string) (map[int32]int64, error) {
	resp, err := b.admin.FetchOffsets(ctx, group)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for p, o := range resp[topic] {
		if o.Err == nil && o.At >= 0 {
			out[p] = o.At
		}
	}
	return out, nil
}

// EndOffsets returns topic's end offsets (high watermarks) by partition.
func (b *Broker) EndOffsets(ctx context.Context, topic string) (map[int32]int64, error) {
	resp, err := b.admin.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for p, o := range resp[topic] {
		if o.Err != nil {
			return nil, o.Err
		}
		out[p] = o.Offset
	}
	return out, nil
}

var nonTopic = regexp.MustCompile(`[^a-zA-Z0-9._-]+`)

// NewTopic creates a topic for tb, named after it, with partitions
// partitions, deleted when tb ends, and returns its name.
func (b *Broker) NewTopic(tb testing.TB, partitions int) string {
	tb.Helper()
	name := nonTopic.ReplaceAllString(tb.Name(), "_")
	if len(name) > 100 {
		name = name[:100]
	}
	name = fmt.Sprintf("t%d-%s", b.topics.Add(1), name)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := b.CreateTopic(ctx, name, partitions); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if !b.Running() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		b.DeleteTopic(ctx, name)
	})
	return name
}

// Shared returns the broker of this process, starting it on first use;
// it dies with the process. A test that cannot have it is skipped or
// failed (proctest.SkipOrFail); one that fails logs the end of the
// broker's log.
func Shared(tb testing.TB) *Broker {
	tb.Helper()
	b, err := SharedBroker()
	if err != nil {
		proctest.SkipOrFail(tb, err, maven.ErrNoJava)
		return nil
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("kafka broker log (last 4000 bytes):\n%s", proctest.Tail(b.Output(), 4000))
		}
	})
	return b
}

// SharedBroker is Shared outside a test (a benchmark's setup): the
// process's broker, started on first use, or the error that stopped it.
var SharedBroker = sync.OnceValues(func() (*Broker, error) { return Start(context.Background(), Options{}) })

// Counter counts the records of a topic per key, as a consumer reading it
// from the start would, in a goroutine, until Stop.
type Counter struct {
	mu     sync.Mutex
	perKey map[string]int
	total  int
	recs   []*kgo.Record
	cancel context.CancelFunc
	done   chan struct{}
}

// Count starts counting topic's committed records (read_committed: an
// open or aborted transaction's are not; from its start, every
// partition, partitions added later included) and stops when tb ends.
func (b *Broker) Count(tb testing.TB, topic string) *Counter {
	tb.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.MetadataMinAge(time.Second), kgo.MetadataMaxAge(time.Second))
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Counter{perKey: map[string]int{}, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		defer cl.Close()
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			c.mu.Lock()
			fs.EachRecord(func(r *kgo.Record) {
				c.perKey[string(r.Key)]++
				c.total++
				c.recs = append(c.recs, r)
			})
			c.mu.Unlock()
		}
	}()
	tb.Cleanup(c.Stop)
	return c
}

// Stop ends the counting; it may be called more than once.
func (c *Counter) Stop() {
	c.cancel()
	<-c.done
}

// Total is the number of records counted.
func (c *Counter) Total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

// Distinct is the number of distinct keys counted.
func (c *Counter) Distinct() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.perKey)
}

// PerKey is a copy of the counts by key.
func (c *Counter) PerKey() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.perKey)
}

// Records are the records counted, in the order they came.
func (c *Counter) Records() []*kgo.Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*kgo.Record(nil), c.recs...)
}

// ReadAll reads every committed record of topic (as a read_committed
// consumer: an open or aborted transaction's are not), from the start of
// each partition to its last stable offset as listed when called.
func (b *Broker) ReadAll(ctx context.Context, topic string) ([]*kgo.Record, error) {
	var out []*kgo.Record
	err := EachCommitted(ctx, b.Addr, topic, func(r *kgo.Record) { out = append(out, r) })
	return out, err
}

// EachCommitted calls f with every committed record of topic on the broker
// at addr, as ReadAll reads them.
func EachCommitted(ctx context.Context, addr, topic string, f func(*kgo.Record)) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return err
	}
	defer cl.Close()
	lso, err := kadm.NewClient(cl).ListCommittedOffsets(ctx, topic)
	if err == nil {
		err = lso.Error()
	}
	if err != nil {
		return fmt.Errorf("kafkatest: the last stable offsets of %s on %s: %w", topic, addr, err)
	}
	end := map[int32]int64{}
	want := map[int32]kgo.Offset{}
	for p, o := range lso[topic] {
		if o.Offset > 0 {
			end[p] = o.Offset
			want[p] = kgo.NewOffset().AtStart()
		}
	}
	if len(want) == 0 {
		return nil
	}
	rd, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: want}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	if err != nil {
		return err
	}
	defer rd.Close()
	n := 0
	next := map[int32]int64{}
	done := func() bool {
		for p, o := range end {
			if next[p] < o {
				return false
			}
		}
		return true
	}
	for !done() {
		fs := rd.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("kafkatest: read %d records of %s by its last stable offsets %v: %w", n, topic, end, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < end[r.Partition] && !r.Attrs.IsControl() {
				n++
				f(r)
			}
			next[r.Partition] = r.Offset + 1
		})
	}
	return nil
}

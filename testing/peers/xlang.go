package peers

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	xkafka "github.com/apache/beam/sdks/v2/go/pkg/beam/io/xlang/kafkaio"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beamdedup/beamdedup/internal/flinkserver"
	"github.com/beamdedup/beamdedup/internal/jobrun"
	"github.com/beamdedup/beamdedup/pipelines/jsonl"
	"github.com/beamdedup/beamdedup/pipelines/orders"
	"github.com/beamdedup/beamdedup/pipelines/streaming"
	"github.com/beamdedup/beamdedup/testing/jobservertest"
	"github.com/beamdedup/beamdedup/transforms/dedup"
)

// Beam Go's own Kafka IO, xlang/kafkaio: Java's KafkaIO, expanded by a
// Java expansion service at construction and run by a Java SDK harness.
// Maven Central serves no expansion-service jar for Beam's IOs, so the
// beamxlang project assembles one from the modules (its pom says which),
// and its Java harness runs as the worker pool of an EXTERNAL environment
// (ExternalWorkerService: each worker a thread of that JVM), so no Docker
// is needed. The Go steps run where the job's environment says.

// BeamXlang is the Java side of Beam Go's xlang kafkaio.
var BeamXlang = project("beam-xlang-kafka-2.62.0", "beamxlang", "")

func init() {
	register.DoFn4x0[context.Context, []byte, []byte, func([]byte, []byte)](&xlangKeyFn{})
	register.Emitter2[[]byte, []byte]()
}

// Xlang is a running expansion service and Java worker pool.
type Xlang struct {
	// Expansion is the expansion service's address, host:port.
	Expansion string
	// WorkerPool is the Java worker pool's, for the EXTERNAL environment
	// the expansion service gives Java's transforms.
	WorkerPool string

	dir   string // the JVMs' working directory, with their logs
	procs []*flinkserver.Process
}

// StartXlang starts the expansion service and the Java worker pool on
// free loopback ports; Close stops them.
func StartXlang(ctx context.Context) (*Xlang, error) {
	cp, err := BeamXlang.Classpath()
	if err != nil {
		return nil, err
	}
	ep, err := jobservertest.FreePort()
	if err != nil {
		return nil, err
	}
	wp, err := jobservertest.FreePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "peers-xlang-")
	if err != nil {
		return nil, err
	}
	x := &Xlang{Expansion: "127.0.0.1:" + strconv.Itoa(ep), WorkerPool: "127.0.0.1:" + strconv.Itoa(wp), dir: dir}
	// The harness sizes its caches with jamm, an agent in the SDK's
	// container (-javaagent, as the container's boot passes it).
	var jvm []string
	for _, jar := range strings.Split(cp, string(os.PathListSeparator)) {
		if strings.Contains(filepath.Base(jar), "jamm-") {
			jvm = append(jvm, "-javaagent:"+jar)
		}
	}
	err = x.start(ctx, "java-worker-pool", cp, "org.apache.beam.fn.harness.ExternalWorkerService", jvm, nil,
		[]string{`PIPELINE_OPTIONS={"options":{"environmentOptions":["external_service_address=` + x.WorkerPool + `"]}}`}, x.WorkerPool)
	if err == nil {
		err = x.start(ctx, "expansion-service", cp, "org.apache.beam.sdk.expansion.service.ExpansionService", nil,
			[]string{strconv.Itoa(ep), "--defaultEnvironmentType=EXTERNAL", "--defaultEnvironmentConfig=" + x.WorkerPool}, nil, x.Expansion)
	}
	if err != nil {
		x.Close()
		return nil, err
	}
	return x, nil
}

// start runs main of classpath cp with the JVM's options jvm, args (and
// env added) and returns once addr accepts connections, at most 2 minutes.
func (x *Xlang) start(ctx context.Context, name, cp, main string, jvm, args, env []string, addr string) error {
	p, err := flinkserver.StartJVM(x.dir, name, append(append(append([]string{"-Xmx1g", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"}, jvm...), "-cp", cp, main), args...), env...)
	if err != nil {
		return err
	}
	x.procs = append(x.procs, p)
	listening := func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil || ctx.Err() != nil
	}
	if err := p.Await(listening, 2*time.Minute, "listen on "+addr); err != nil {
		return fmt.Errorf("peers: %s %w", name, err)
	}
	return ctx.Err()
}

// Close stops the JVMs and removes their directory.
func (x *Xlang) Close() {
	for _, p := range x.procs {
		p.Kill()
	}
	os.RemoveAll(x.dir)
}

// Logs are the end of each JVM's output.
func (x *Xlang) Logs() string {
	var b strings.Builder
	for _, p := range x.procs {
		fmt.Fprintf(&b, "--- %s (%s)\n%s\n", p.Name, p.Log, tail(p.Output(), 3000))
	}
	return b.String()
}

// XlangKafka runs seed 001 with Beam Go's xlang kafkaio: Java's
// KafkaIO.Read of topic in (from the earliest offsets, group group) → the
// value decoded as an order and keyed by order_id (Go) → KeepFirst, as in
// pipelines/streaming over Kafka → Java's KafkaIO.Write into topic out. The read is
// unbounded, so the job is cancelled once out holds every order, or after
// noOutput with no output record at all, or after limit: a run that does
// not finish returns what it wrote and an error saying so.
func XlangKafka(ctx context.Context, x *Xlang, job jobrun.Options, side, brokers, in, out, group string, records, distinct int, noOutput, limit time.Duration) (KafkaTiming, error) {
	p, s := beam.NewPipelineWithRoot()
	raw := xkafka.Read(s, x.Expansion, brokers, []string{in},
		xkafka.ConsumerConfigs(map[string]string{"auto.offset.reset": "earliest", "group.id": group}))
	keyed := beam.ParDo(s, &xlangKeyFn{}, raw)
	res, err := dedup.TryKeepFirst(s, keyed, dedup.StateTTL(streaming.DefaultKafkaStateTTL), dedup.CleanupTimers(false), dedup.UID("xlang-dedup"))
	if err != nil {
		return KafkaTiming{}, err
	}
	// As pipelines/streaming: KeepFirst's stage not last in its fused chain.
	xkafka.Write(s, x.Expansion, brokers, out, beam.Reshuffle(s, res.Rows))

	job.StallLimit = -1 // the deadlines below watch it
	job.What = side + " job"
	start := time.Now()
	j, err := jobrun.Start(ctx, p, job)
	if err != nil {
		return KafkaTiming{}, fmt.Errorf("peers: %s: %w", side, err)
	}
	var got, n int
	for {
		select {
		case <-j.Done():
			_, err := j.Wait()
			return KafkaTiming{}, fmt.Errorf("peers: %s: the job ended before writing every order (%d of %d): %v", side, got, distinct, err)
		case <-ctx.Done():
			j.Cancel()
			return KafkaTiming{}, ctx.Err()
		case <-time.After(time.Second):
		}
		octx, cancel := context.WithTimeout(ctx, time.Minute)
		n, got, _, err = OutputOf(octx, brokers, out)
		cancel()
		if err != nil {
			j.Cancel()
			return KafkaTiming{}, err
		}
		if got >= distinct {
			break
		}
		if el := time.Since(start); (got == 0 && el > noOutput) || el > limit {
			j.Cancel()
			return KafkaTiming{Side: side, Records: records, Out: n, Distinct: got, Wall: el.Seconds()},
				fmt.Errorf("peers: %s: %d of %d orders written after %v; cancelled", side, got, distinct, el.Round(time.Second))
		}
	}
	wall := time.Since(start).Seconds()
	j.Cancel()
	return timed(ctx, side, brokers, out, records, start, wall)
}

// xlangKeyFn decodes a record's value as an order (the rule of the JSON
// Lines files, as pipelines/streaming) and keys it by order_id; what does not
// decode is dropped (the benchmark's input has none).
type xlangKeyFn struct{}

func (*xlangKeyFn) ProcessElement(_ context.Context, _, v []byte, emit func([]byte, []byte)) {
	row, reason := jsonl.ParseRow(reflect.TypeFor[orders.Order](), string(v))
	if reason != "" {
		return
	}
	emit([]byte(row.(orders.Order).OrderID), v)
}

package peers

import (
	"context"
	_ "embed"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	xkafka "github.com/apache/beam/sdks/v2/go/pkg/beam/io/xlang/kafkaio"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beamdedup/beamdedup/internal/jobrun"
	"github.com/beamdedup/beamdedup/internal/maven"
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

//go:embed beamxlang/pom.xml
var beamXlangPom []byte

// BeamXlang is the Java side of Beam Go's xlang kafkaio.
var BeamXlang = &maven.Project{Name: "beam-xlang-kafka-2.62.0", Pom: beamXlangPom}

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

	procs []*javaProc
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
	x := &Xlang{Expansion: "127.0.0.1:" + strconv.Itoa(ep), WorkerPool: "127.0.0.1:" + strconv.Itoa(wp)}
	// The harness sizes its caches with jamm, an agent in the SDK's
	// container (-javaagent, as the container's boot passes it).
	var jvm []string
	for _, jar := range strings.Split(cp, string(os.PathListSeparator)) {
		if strings.Contains(filepath.Base(jar), "jamm-") {
			jvm = append(jvm, "-javaagent:"+jar)
		}
	}
	pool, err := startJava(ctx, "java-worker-pool", cp, "org.apache.beam.fn.harness.ExternalWorkerService", jvm, nil,
		[]string{`PIPELINE_OPTIONS={"options":{"environmentOptions":["external_service_address=` + x.WorkerPool + `"]}}`}, x.WorkerPool)
	if err != nil {
		return nil, err
	}
	x.procs = append(x.procs, pool)
	exp, err := startJava(ctx, "expansion-service", cp, "org.apache.beam.sdk.expansion.service.ExpansionService", nil,
		[]string{strconv.Itoa(ep), "--defaultEnvironmentType=EXTERNAL", "--defaultEnvironmentConfig=" + x.WorkerPool}, nil, x.Expansion)
	if err != nil {
		x.Close()
		return nil, err
	}
	x.procs = append(x.procs, exp)
	return x, nil
}

// Close stops the JVMs.
func (x *Xlang) Close() {
	for _, p := range x.procs {
		p.stop()
	}
}

// Logs are the end of each JVM's output.
func (x *Xlang) Logs() string {
	var b strings.Builder
	for _, p := range x.procs {
		fmt.Fprintf(&b, "--- %s (%s)\n%s\n", p.name, p.log, tail(p.output(), 3000))
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
	t, err := timed(ctx, side, brokers, out, records, start, wall)
	return t, err
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

// javaProc is a JVM of ours, killed with its process group, and with the
// thread that started it (Pdeathsig): a harness that dies leaves none.
type javaProc struct {
	name, dir, log string
	cmd            *exec.Cmd
	done           chan struct{}
}

func (p *javaProc) output() string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}

func (p *javaProc) stop() {
	if p.cmd.Process != nil {
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
	<-p.done
	os.RemoveAll(p.dir)
}

// startJava runs main of classpath cp with the JVM's options jvm, args
// (and env added) and returns once addr accepts connections.
func startJava(ctx context.Context, name, cp, main string, jvm, args, env []string, addr string) (*javaProc, error) {
	dir, err := os.MkdirTemp("", "peers-"+name+"-")
	if err != nil {
		return nil, err
	}
	p := &javaProc{name: name, dir: dir, log: filepath.Join(dir, "out.log"), done: make(chan struct{})}
	logFile, err := os.Create(p.log)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		p.cmd = exec.Command("java", append(append(append([]string{"-Xmx1g", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"}, jvm...), "-cp", cp, main), args...)...)
		p.cmd.Dir = dir
		p.cmd.Env = append(os.Environ(), env...)
		p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
		p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		err := p.cmd.Start()
		started <- err
		if err == nil {
			p.cmd.Wait()
		}
		close(p.done)
	}()
	if err := <-started; err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("peers: starting %s: %w", name, err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return p, nil
		}
		select {
		case <-p.done:
			os.RemoveAll(dir)
			return nil, fmt.Errorf("peers: %s exited before listening on %s:\n%s", name, addr, tail(p.output(), 3000))
		case <-ctx.Done():
			p.stop()
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			out := p.output()
			p.stop()
			return nil, fmt.Errorf("peers: %s did not listen on %s within 2m:\n%s", name, addr, tail(out, 3000))
		}
	}
}

package flinktest_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/flink"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/internal/flinkrest"
	"github.com/beamdedup/beamdedup/internal/jobrun"
	"github.com/beamdedup/beamdedup/internal/jobrun/localprism"
	"github.com/beamdedup/beamdedup/testing/flinktest"
	"github.com/beamdedup/beamdedup/testing/jobservertest"
	"github.com/beamdedup/beamdedup/transforms/dedup"
)

// Every test of this package runs on one Flink session cluster of its own
// processes (flinktest.SharedCluster: a JobManager, two TaskManagers and
// the job server submitting to them), started at the first test that
// needs it: the transforms' semantics beside Prism, runjob's samples, the
// Flink options of a Go job, the watchdog, checkpoints, savepoints, a
// TaskManager killed.
func TestMain(m *testing.M) {
	flag.Parse()
	beam.Init()
	jobrun.DisableSplits() // for the Prism runs; the Flink runner ignores the experiment
	flinktest.MainCluster(m)
}

// runner is where a case runs: Prism in this process, or the shared Flink
// cluster at parallelism 1, both with the SDK workers in this process
// (LOOPBACK), so that collect's outputs land here.
type runner string

const (
	onPrism runner = "prism"
	onFlink runner = "flink"
)

var runners = []runner{onPrism, onFlink}

// runOn runs p on r with a deadline and returns its result.
func runOn(t *testing.T, r runner, p *beam.Pipeline, deadline time.Duration) beam.PipelineResult {
	t.Helper()
	o := jobrun.Options{Runner: string(r), EnvironmentType: "LOOPBACK", StallLimit: deadline, What: t.Name()}
	switch r {
	case onPrism:
		var err error
		o, err = localprism.Options(o)
		require.NoError(t, err)
	case onFlink:
		o = options(t, o)
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	pr, err := jobrun.Run(ctx, p, o)
	require.NoError(t, err, "run on %s (deadline %v)", r, deadline)
	return pr
}

// runUntil runs p on the cluster until done reports true (polled every
// 200 ms, at most timeout: past it the test fails), then cancels it and
// returns the counters it had committed.
func runUntil(t *testing.T, p *beam.Pipeline, done func() bool, timeout time.Duration) dedup.Counters {
	t.Helper()
	j := start(t, p, jobrun.Options{StallLimit: -1})
	deadline := time.After(timeout)
	for !done() {
		select {
		case <-j.Done():
			_, err := j.Wait()
			t.Fatalf("the job ended before it was cancelled: %v", err)
		case <-deadline:
			t.Fatalf("the job did not get there within %v", timeout)
		case <-time.After(200 * time.Millisecond):
		}
	}
	m, err := j.Metrics(context.Background())
	require.NoError(t, err, "the job's metrics")
	require.NoError(t, j.Cancel())
	return dedup.ReadCounters(committed{m})
}

// committed is a job's metrics as a beam.PipelineResult.
type committed struct{ m metrics.Results }

func (c committed) Metrics() metrics.Results { return c.m }
func (c committed) JobID() string            { return "" }

// options are a job's on the shared cluster, its SDK workers in this
// process (LOOPBACK: collect's outputs land here) unless o says where.
// Beam's LOOPBACK and EXTERNAL workers serve one TaskManager only
// (notes/beam-defects.md, 20): a job at parallelism 2 runs its workers
// as processes of each TaskManager (process).
func options(t *testing.T, o jobrun.Options) jobrun.Options {
	c := flinktest.SharedCluster(t)
	// A TaskManager that died in an earlier test (killed by it, or dead of
	// its heap: the report is in its log) is replaced, so that one test's
	// failure is not every later test's.
	died, err := c.Replenish(2)
	require.NoError(t, err)
	if died != "" {
		t.Logf("replaced TaskManagers that died before this test:\n%s", died)
	}
	o.Runner, o.Endpoint, o.FlinkREST = "flink", c.Endpoint, c.REST
	if o.EnvironmentType == "" {
		o.EnvironmentType = "LOOPBACK"
	}
	if o.What == "" {
		o.What = t.Name()
	}
	return o
}

// process sets o to run the SDK workers as processes of the TaskManagers
// (a PROCESS environment): Beam Go's boot loader, which fetches the
// worker binary, this test binary, from the job's artifacts, each run of
// it into a directory of its own (jobservertest.BootInADirOfItsOwn).
func process(t *testing.T, o jobrun.Options) jobrun.Options {
	boot := jobservertest.BootInADirOfItsOwn(t)
	exe, err := os.Executable()
	require.NoError(t, err)
	o.EnvironmentType, o.EnvironmentConfig, o.WorkerBinary = "PROCESS", fmt.Sprintf(`{"command":%q}`, boot), exe
	jobservertest.RemoveBootCopies(t, exe)
	return o
}

// start submits p to the cluster with options(t, o) (flinktest.Start).
func start(t *testing.T, p *beam.Pipeline, o jobrun.Options) *jobrun.Job {
	t.Helper()
	return flinktest.Start(t, p, options(t, o))
}

// flinkJob waits until the job is RUNNING on the cluster, every task of
// it running or (a source's impulse) finished, and returns its id.
func flinkJob(t *testing.T, j *jobrun.Job) string {
	t.Helper()
	var id string
	flinktest.Await(t, 90*time.Second, "the job running on the cluster, every task of it", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var err error
		if id, err = j.FlinkJobID(ctx); err != nil {
			return false
		}
		fj, err := j.Flink().Job(ctx, id)
		if err != nil || fj.State != "RUNNING" {
			return false
		}
		running := 0
		for _, v := range fj.Vertices {
			switch v.Status {
			case "RUNNING":
				running++
			case "FINISHED":
			default:
				return false
			}
		}
		return running > 0
	})
	return id
}

func rest(t *testing.T) *flinkrest.Client { return flinkrest.New(flinktest.SharedCluster(t).REST) }

// The outputs of collect, by the run's name. The SDK workers run in this
// process (LOOPBACK), so the DoFn's instances write here directly.
var collected struct {
	sync.Mutex
	rows map[string][]string
}

// collectFn records each element as JSON, with its event time when At.
type collectFn struct {
	Name string
	At   bool
}

func (f *collectFn) ProcessElement(ts beam.EventTime, row beam.X) {
	b, err := json.Marshal(row)
	if err != nil {
		panic(err)
	}
	s := string(b)
	if f.At {
		s += "@" + ts.ToTime().UTC().Format("15:04:05")
	}
	collected.Lock()
	defer collected.Unlock()
	if collected.rows == nil {
		collected.rows = map[string][]string{}
	}
	collected.rows[f.Name] = append(collected.rows[f.Name], s)
}

func init() {
	register.DoFn2x0[beam.EventTime, beam.X](&collectFn{})
}

var runSeq struct {
	sync.Mutex
	n int
}

// collect records col's elements under a name of its own, which it
// returns for rowsOf.
func collect(s beam.Scope, col beam.PCollection, withTime bool) string {
	runSeq.Lock()
	runSeq.n++
	name := fmt.Sprintf("c%d", runSeq.n)
	runSeq.Unlock()
	beam.ParDo0(s, &collectFn{Name: name, At: withTime}, col)
	return name
}

// rowsOf returns what collect recorded under name, sorted.
func rowsOf(name string) []string {
	collected.Lock()
	defer collected.Unlock()
	rows := slices.Clone(collected.rows[name])
	slices.Sort(rows)
	return rows
}

// jsonRows is want in collect's format, sorted.
func jsonRows(t *testing.T, rows ...any) []string {
	var out []string
	for _, r := range rows {
		if s, ok := r.(string); ok {
			out = append(out, s)
			continue
		}
		b, err := json.Marshal(r)
		require.NoError(t, err)
		out = append(out, string(b))
	}
	slices.Sort(out)
	return out
}

func registerTypes(ts ...any) {
	for _, t := range ts {
		beam.RegisterType(reflect.TypeOf(t))
	}
}

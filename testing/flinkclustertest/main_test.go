package flinkclustertest_test

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
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/flink"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/pipelines/jobrun"
	"github.com/beamdedup/beamdedup/pipelines/jobrun/flinkrest"
	"github.com/beamdedup/beamdedup/testing/flinktest"
	"github.com/beamdedup/beamdedup/testing/jobservertest"
)

func TestMain(m *testing.M) {
	flag.Parse()
	beam.Init()
	flinktest.MainCluster(m)
}

// options are a job's on the shared cluster, its SDK workers in this
// process (LOOPBACK: collect's outputs land here) unless o says where.
// Beam's LOOPBACK and EXTERNAL workers serve one TaskManager only
// (notes/beam-defects.md, 18): a job at parallelism 2 runs its workers
// as processes of each TaskManager (process).
func options(t *testing.T, o jobrun.Options) jobrun.Options {
	c := flinktest.SharedCluster(t)
	// A TaskManager that died in an earlier test (Java heap: see the
	// report in its log) is replaced, so that one test's failure is not
	// every later test's.
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
// worker binary, this test binary, from the job's artifacts.
func process(t *testing.T, o jobrun.Options) jobrun.Options {
	boot, err := jobservertest.BootLoader()
	require.NoError(t, err)
	exe, err := os.Executable()
	require.NoError(t, err)
	o.EnvironmentType, o.EnvironmentConfig, o.WorkerBinary = "PROCESS", fmt.Sprintf(`{"command":%q}`, boot), exe
	return o
}

// start submits p to the cluster and cancels it when the test ends, if
// it still runs.
func start(t *testing.T, p *beam.Pipeline, o jobrun.Options) *jobrun.Job {
	t.Helper()
	j, err := jobrun.Start(context.Background(), p, options(t, o))
	require.NoError(t, err)
	t.Cleanup(func() {
		select {
		case <-j.Done():
		default:
			j.Cancel()
			j.Wait()
		}
		ended(t, j)
	})
	return j
}

// ended fails the test when the job still runs on the cluster after it
// ended for jobrun, and cancels it there: a job left running (its LOOPBACK
// workers gone with its test) restarts on and starves the next tests.
func ended(t *testing.T, j *jobrun.Job) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, err := j.FlinkJobID(ctx)
	if err != nil {
		return // it never reached the cluster
	}
	for ctx.Err() == nil {
		fj, err := j.Flink().Job(ctx, id)
		if err == nil && flinkrest.Terminal(fj.State) {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Errorf("the Flink job %s still runs on the cluster after its end; cancelled", id)
	j.Flink().Cancel(context.Background(), id)
}

// await polls cond every 200 ms until it holds, failing the test past
// timeout with what it was waiting for.
func await(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", timeout, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// flinkJob waits until the job is RUNNING on the cluster, every task of
// it running or (a source's impulse) finished, and returns its id.
func flinkJob(t *testing.T, j *jobrun.Job) string {
	t.Helper()
	var id string
	await(t, 90*time.Second, "the job running on the cluster, every task of it", func() bool {
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

// The outputs of collect, by name. The SDK workers run in this process
// (LOOPBACK), so the DoFn's instances write here directly.
var collected struct {
	sync.Mutex
	rows map[string][]string
}

// collectFn records each element as JSON.
type collectFn struct{ Name string }

func (f *collectFn) ProcessElement(row beam.X) {
	b, err := json.Marshal(row)
	if err != nil {
		panic(err)
	}
	collected.Lock()
	defer collected.Unlock()
	if collected.rows == nil {
		collected.rows = map[string][]string{}
	}
	collected.rows[f.Name] = append(collected.rows[f.Name], string(b))
}

func init() {
	register.DoFn1x0[beam.X](&collectFn{})
}

var seq struct {
	sync.Mutex
	n int
}

// collect records col's elements under a name of its own, which it
// returns for rowsOf.
func collect(s beam.Scope, col beam.PCollection) string {
	seq.Lock()
	seq.n++
	name := fmt.Sprintf("c%d", seq.n)
	seq.Unlock()
	beam.ParDo0(s, &collectFn{Name: name}, col)
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

func registerTypes(ts ...any) {
	for _, t := range ts {
		beam.RegisterType(reflect.TypeOf(t))
	}
}

package flinktest_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
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

	"github.com/beamdedup/beamdedup/pipelines/jobrun"
	"github.com/beamdedup/beamdedup/pipelines/jobrun/localprism"
	"github.com/beamdedup/beamdedup/testing/flinktest"
	"github.com/beamdedup/beamdedup/transforms/dedup"
)

func TestMain(m *testing.M) {
	flag.Parse()
	beam.Init()
	jobrun.DisableSplits() // for the Prism runs; the Flink runner ignores the experiment
	flinktest.Main(m)
}

// runner is where a case runs: Prism in this process, or the shared Flink
// job server, both with the SDK workers in this process (LOOPBACK), so
// that collect's outputs land here.
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
		o.Endpoint = flinktest.Shared(t).Endpoint
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	pr, err := jobrun.Run(ctx, p, o)
	require.NoError(t, err, "run on %s (deadline %v)", r, deadline)
	return pr
}

// runUntil runs p on Flink until done reports true (polled every 200 ms,
// at most timeout: past it the test fails), then cancels it (a Flink
// streaming job with a splittable source does not end by itself) and
// returns the counters it had committed.
func runUntil(t *testing.T, p *beam.Pipeline, done func() bool, timeout time.Duration) dedup.Counters {
	t.Helper()
	o := jobrun.Options{Runner: string(onFlink), Endpoint: flinktest.Shared(t).Endpoint, EnvironmentType: "LOOPBACK",
		StallLimit: -1, What: t.Name()}
	j, err := jobrun.Start(context.Background(), p, o)
	require.NoError(t, err)
	defer j.Cancel()
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

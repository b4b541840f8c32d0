package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	beamlog "github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	pipepb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/pipeline_v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/beamdedup/beamdedup/testing/jobservertest"
)

// runJob runs runjob in process with args and a deadline for the job.
func runJob(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	code = run(ctx, append([]string{"--timeout=90s"}, args...), &out, &errb)
	t.Logf("runjob %s: exit %d in %v\n%s%s", strings.Join(args, " "), code, time.Since(start).Round(time.Millisecond), out.String(), errb.String())
	return code, out.String(), errb.String()
}

// orderIDs returns the number of rows of a JSON Lines orders file and the
// number of distinct order_ids among them.
func orderIDs(t *testing.T, path string) (rows, distinct int) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	ids := map[string]bool{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
		var r struct {
			OrderID string `json:"order_id"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &r), line)
		rows++
		ids[r.OrderID] = true
	}
	return rows, len(ids)
}

func TestRunDefaultPrintsSummaryAndWritesOneRowPerOrder(t *testing.T) {
	out := filepath.Join(t.TempDir(), "orders.jsonl")
	code, stdout, _ := runJob(t, "--output="+out, "--state_ttl=2h")
	require.Equal(t, 0, code)

	for _, want := range []string{"rows in ", "emitted             1000", "duplicates dropped", "dead-lettered       0", "wall time", out} {
		assert.Contains(t, stdout, want)
	}
	rows, distinct := orderIDs(t, out)
	assert.Equal(t, 1000, rows)
	assert.Equal(t, 1000, distinct, "exactly one row per distinct order_id")
	assert.NoFileExists(t, strings.TrimSuffix(out, ".jsonl")+".errors.jsonl")
}

func TestRunEachSamplePipelineOnItsTestdata(t *testing.T) {
	for _, tc := range []struct {
		pipeline   string
		rows       int
		deadLetter string
	}{
		{"orders", 12, "missing order_id"},
		{"userevents", 3, "missing rowtime"},
		{"cdc", 4, "unknown row kind"},
	} {
		t.Run(tc.pipeline, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out.jsonl")
			code, stdout, _ := runJob(t, "--pipeline="+tc.pipeline,
				"--input="+filepath.Join("..", "..", "testing", "testdata", tc.pipeline, "input.jsonl"), "--output="+out)
			require.Equal(t, 0, code)
			assert.Contains(t, stdout, "dead letters        "+filepath.Join(filepath.Dir(out), "out.errors.jsonl"))
			assert.Regexp(t, `every line +\d+ = \d+ emitted \+ \d+ duplicates dropped .*\+ \d+ dead-lettered \+ \d+ blank\n`, stdout)
			assert.NotContains(t, stdout, "does not add up")
			b, err := os.ReadFile(out)
			require.NoError(t, err)
			assert.Equal(t, tc.rows, strings.Count(string(b), "\n"))
			errs, err := os.ReadFile(filepath.Join(filepath.Dir(out), "out.errors.jsonl"))
			require.NoError(t, err)
			assert.Contains(t, string(errs), tc.deadLetter)
		})
	}
}

func TestRunDirectRunnerFallsBackToPrismWithNotice(t *testing.T) {
	out := filepath.Join(t.TempDir(), "orders.jsonl")
	code, stdout, stderr := runJob(t, "--runner=direct", "--count=50", "--output="+out)
	require.Equal(t, 0, code)
	assert.Contains(t, stderr, "--runner=direct: Beam Go's direct runner supports neither state nor timers")
	assert.Equal(t, 1, strings.Count(stderr, "runjob:"), "a one-line notice")
	assert.Contains(t, stdout, "orders on prism")
	_, distinct := orderIDs(t, out)
	assert.Equal(t, 50, distinct)
}

func TestRunRejectsBadFlagsWithOneLineReason(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unparsable duration", []string{"--state_ttl=abc"}, "--state_ttl=abc: not a duration; want a number with a unit, such as 90s, 30m or 2h"},
		{"a duration without its unit", []string{"--stall_limit=-1"}, "--stall_limit=-1: not a duration"},
		{"unparsable number", []string{"--count=many"}, "--count=many: want a whole number"},
		{"unparsable boolean", []string{"--force_stateful=maybe"}, "--force_stateful=maybe: want true or false"},
		{"flag without its value", []string{"--input"}, "--input needs a value: --input=VALUE"},
		{"negative ttl", []string{"--state_ttl=-1s"}, "must be >= 0"},
		{"negative state buckets", []string{"--state_buckets=-1"}, "--state_buckets=-1: want 0 (a cell per key) or a number of buckets"},
		{"unknown pipeline", []string{"--pipeline=payments"}, `--pipeline="payments": want one of orders, userevents, cdc, streaming`},
		{"unknown runner", []string{"--runner=samza"}, `--runner="samza": want prism`},
		{"unknown column", []string{"--partition_by=customer"}, "customer"},
		{"on_time of wrong type", []string{"--on_time=order_id"}, "order_id"},
		{"unknown flag", []string{"--colour=red"}, "--colour is not a flag of runjob (runjob --help lists them all)"},
		{"misspelt flag", []string{"--cuont=5"}, "--cuont is not a flag of runjob; did you mean --count?"},
		{"missing input file", []string{"--input=does-not-exist.jsonl"}, `orders: input: no file matches "does-not-exist.jsonl"`},
		{"glob matching nothing", []string{"--pipeline=cdc", "--input=nothing-here/*.jsonl"}, `cdc: input: no file matches "nothing-here/*.jsonl"`},
		{"stray argument", []string{"orders"}, `unexpected argument "orders"`},
		{"zero count", []string{"--count=0"}, "--count=0"},
		{"dot without file", []string{"--runner=dot"}, "--runner=dot needs --dot_file"},
		{"flag not for streaming", []string{"--pipeline=streaming", "--input=x"}, "--input does not apply to --pipeline=streaming"},
		{"generated input with remote output", []string{"--output=gs://b/o.jsonl"}, "--output=gs://b/o.jsonl is not local: give --input too (a file the workers can read)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runJob(t, append([]string{"--output=" + filepath.Join(t.TempDir(), "o.jsonl")}, tc.args...)...)
			assert.Equal(t, 2, code)
			assert.Empty(t, stdout)
			assert.Contains(t, stderr, tc.want)
			assert.NotContains(t, stderr, "see --help")
			assert.Equal(t, 1, strings.Count(strings.TrimSpace(stderr), "\n")+1, "one line: %q", stderr)
		})
	}
}

func TestRunHelpListsFlagsAndExamples(t *testing.T) {
	code, stdout, _ := runJob(t, "--help")
	require.Equal(t, 0, code)
	for _, want := range []string{
		"go run ./cmd/runjob\n", "--runner=dataflow --dry_run", "--runner=universal --endpoint=",
		"--pipeline=", "--input=", "--output=", "--partition_by=", "--on_time=", "--state_ttl=", "--event_time_ttl=",
		"--reset_ttl_on_duplicate", "--state_buckets=", "--uid=", "--graph=",
		"--runner=", "--endpoint=", "--environment_type=", "--job_name=", "--project=", "--region=", "--staging_location=", "--temp_location=",
	} {
		assert.Contains(t, stdout, want)
	}
}

// A dead endpoint must fail in seconds, not after the universal runner's
// 2-minute connection timeout.
func TestRunPortableRunnersFailFastWithoutJobServer(t *testing.T) {
	port, err := jobservertest.FreePort()
	require.NoError(t, err)
	dead := "localhost:" + strconv.Itoa(port)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"flink without endpoint", []string{"--runner=flink"}, "--runner=flink needs --endpoint=HOST:PORT"},
		{"flink with dead endpoint", []string{"--runner=flink", "--endpoint=" + dead}, "--runner=flink: no job server at --endpoint=" + dead},
		{"universal with dead endpoint", []string{"--runner=universal", "--endpoint=" + dead}, "no job server"},
		{"spark without endpoint", []string{"--runner=SparkRunner"}, "--runner=spark needs --endpoint"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			code, _, stderr := runJob(t, tc.args...)
			assert.NotEqual(t, 0, code)
			assert.Contains(t, stderr, tc.want)
			assert.Less(t, time.Since(start), 10*time.Second)
		})
	}
}

// An EXTERNAL environment without its worker pool fails before the job is
// submitted: the job server could start no worker (and Prism crashes).
func TestRunRefusesAnExternalEnvironmentWithoutItsWorkerPool(t *testing.T) {
	jobServer, err := net.Listen("tcp", "127.0.0.1:0") // the probe only dials
	require.NoError(t, err)
	defer jobServer.Close()
	port, err := jobservertest.FreePort()
	require.NoError(t, err)
	dead := "localhost:" + strconv.Itoa(port)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no pool address", []string{"--environment_type=EXTERNAL"}, "--environment_type=EXTERNAL needs --environment_config=HOST:PORT of a worker pool"},
		{"no pool there", []string{"--environment_type=external", "--environment_config=" + dead}, "no worker pool at --environment_config=" + dead},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runJob(t, append([]string{"--runner=universal", "--endpoint=" + jobServer.Addr().String(), "--count=10"}, tc.args...)...)
			assert.Equal(t, 2, code)
			assert.Empty(t, stdout)
			assert.Contains(t, stderr, tc.want)
		})
	}
}

// Without --environment_type a portable runner's workers run in Docker
// (Beam's default); without a Docker engine runjob refuses before Beam
// compiles anything, naming the environments to give instead.
func TestRunRefusesBeamsDockerDefaultWithoutADockerEngine(t *testing.T) {
	if _, err := exec.LookPath("docker"); err == nil {
		t.Skip("docker is on PATH")
	}
	jobServer, err := net.Listen("tcp", "127.0.0.1:0") // the probe only dials
	require.NoError(t, err)
	defer jobServer.Close()
	start := time.Now()
	code, stdout, stderr := runJob(t, "--runner=universal", "--endpoint="+jobServer.Addr().String(), "--count=10")
	assert.Equal(t, 2, code)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, "Beam's default, DOCKER, needs a Docker engine")
	assert.Contains(t, stderr, "--environment_type=LOOPBACK")
	assert.Less(t, time.Since(start), 10*time.Second)
}

// The Job API path a Flink job server serves, against a real standalone
// job server: Prism's, built from Beam's cmd/prism. --runner=flink is the
// universal runner under another name, so it submits the same way.
func TestRunPortableRunnersOnStandaloneJobServer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts a job server")
	}
	endpoint := jobservertest.Start(t)
	for _, runner := range []string{"universal", "portable", "flink"} {
		t.Run(runner, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "orders.jsonl")
			code, stdout, _ := runJob(t, "--runner="+runner, "--endpoint="+endpoint, "--environment_type=LOOPBACK",
				"--count=200", "--output="+out)
			require.Equal(t, 0, code)
			assert.Contains(t, stdout, runner+" via the job server at "+endpoint)
			assert.Contains(t, stdout, "emitted             200")
			rows, distinct := orderIDs(t, out)
			assert.Equal(t, 200, rows)
			assert.Equal(t, 200, distinct)
		})
	}
	// KeepFirst's stateful expansion with its event-time timer, through the
	// job server.
	t.Run("universal stateful event time", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "events.jsonl")
		code, stdout, _ := runJob(t, "--runner=universal", "--endpoint="+endpoint, "--environment_type=LOOPBACK",
			"--pipeline=userevents", "--force_stateful", "--input="+filepath.Join("..", "..", "testing", "testdata", "userevents", "input.jsonl"),
			"--output="+out)
		require.Equal(t, 0, code)
		assert.Contains(t, stdout, "emitted             3")
		want, err := os.ReadFile(filepath.Join("..", "..", "testing", "testdata", "userevents", "expected.jsonl"))
		require.NoError(t, err)
		got, err := os.ReadFile(out)
		require.NoError(t, err)
		assert.ElementsMatch(t, strings.Fields(string(want)), strings.Fields(string(got)))
	})
}

func TestRunWritesPipelineGraphAsDOT(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		file string
		want string
	}{
		{"graph flag", []string{"--graph=" + filepath.Join(dir, "g.dot")}, "g.dot", `label="orders-dedup"`},
		{"dot runner", []string{"--runner=dot", "--dot_file=" + filepath.Join(dir, "d.dot")}, "d.dot", "dedup.keyCandidatesFn"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, _ := runJob(t, append(tc.args, "--count=10", "--output="+filepath.Join(dir, tc.name+".jsonl"))...)
			require.Equal(t, 0, code)
			b, err := os.ReadFile(filepath.Join(dir, tc.file))
			require.NoError(t, err)
			assert.Contains(t, string(b), "digraph")
			assert.Contains(t, string(b), tc.want)
		})
	}
}

// captureLogger records Beam's log messages: a Dataflow dry run logs the
// translated pipeline proto.
type captureLogger struct {
	mu   sync.Mutex
	msgs []string
}

func (l *captureLogger) Log(_ context.Context, _ beamlog.Severity, _ int, msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, msg)
}

// dryRunPipeline runs a Dataflow dry run and returns the pipeline proto
// it translated.
func dryRunPipeline(t *testing.T, args ...string) *pipepb.Pipeline {
	t.Helper()
	logs := &captureLogger{}
	beamlog.SetLogger(logs)
	defer beamlog.SetLogger(&beamlog.Structural{})
	start := time.Now()
	code, _, _ := runJob(t, append([]string{"--runner=dataflow", "--dry_run", "--project=p", "--region=r",
		"--staging_location=gs://b/s", "--input=gs://b/in/*.jsonl", "--output=gs://b/out/o.jsonl"}, args...)...)
	require.Equal(t, 0, code)
	assert.Less(t, time.Since(start), 30*time.Second, "translation is offline")
	logs.mu.Lock()
	defer logs.mu.Unlock()
	for _, m := range logs.msgs {
		var p pipepb.Pipeline
		if prototext.Unmarshal([]byte(m), &p) == nil && len(p.GetComponents().GetTransforms()) > 0 {
			return &p
		}
	}
	require.FailNow(t, "no pipeline proto in the dry run's log")
	return nil
}

// stateful returns the ParDo payloads of the pipeline's transforms whose
// name contains uid and that declare state or timers.
func stateful(t *testing.T, p *pipepb.Pipeline, uid string) map[string]*pipepb.ParDoPayload {
	t.Helper()
	got := map[string]*pipepb.ParDoPayload{}
	for _, tr := range p.GetComponents().GetTransforms() {
		if tr.GetSpec().GetUrn() != "beam:transform:pardo:v1" || !strings.Contains(tr.GetUniqueName(), uid) {
			continue
		}
		var pd pipepb.ParDoPayload
		require.NoError(t, proto.Unmarshal(tr.GetSpec().GetPayload(), &pd))
		if len(pd.GetStateSpecs()) > 0 || len(pd.GetTimerFamilySpecs()) > 0 {
			got[tr.GetUniqueName()] = &pd
		}
	}
	return got
}

func TestRunDataflowDryRunTranslatesDedupStateAndTimers(t *testing.T) {
	for _, tc := range []struct {
		name        string
		args        []string
		uid         string
		steps       int // steps with state
		timerDomain pipepb.TimeDomain_Enum
	}{
		// What an unbounded source gets: a bag state (marks, or versions
		// in event-time mode, docs/state.md), plus the event-time timer
		// that finalizes the candidate in event-time mode.
		{"orders stateful", []string{"--force_stateful", "--state_ttl=2h"}, "orders-dedup", 1, pipepb.TimeDomain_UNSPECIFIED},
		{"userevents stateful", []string{"--pipeline=userevents", "--force_stateful"}, "user-events-dedup", 1, pipepb.TimeDomain_EVENT_TIME},
		{"userevents event-time ttl", []string{"--pipeline=userevents", "--event_time_ttl=1h"}, "user-events-dedup", 1, pipepb.TimeDomain_EVENT_TIME},
		// A file gets the batch expansion, a combine without state.
		{"orders batch", nil, "orders-dedup", 0, pipepb.TimeDomain_UNSPECIFIED},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := dryRunPipeline(t, tc.args...)
			steps := stateful(t, p, tc.uid)
			require.Len(t, steps, tc.steps, "stateful steps of %s", tc.uid)
			for name, pd := range steps {
				assert.NotEmpty(t, pd.GetStateSpecs(), "%s state specs", name)
				for id, st := range pd.GetStateSpecs() {
					assert.NotNil(t, st.GetBagSpec(), "state %s is a bag state", id)
				}
				if tc.timerDomain == pipepb.TimeDomain_UNSPECIFIED {
					assert.Empty(t, pd.GetTimerFamilySpecs(), "%s: no timers on bounded input", name)
					continue
				}
				require.Len(t, pd.GetTimerFamilySpecs(), 1, "%s: one timer family", name)
				for _, tf := range pd.GetTimerFamilySpecs() {
					assert.Equal(t, tc.timerDomain, tf.GetTimeDomain())
				}
			}
		})
	}
}

func TestRunStreamingPipelineRunsThePubSubDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("streams for several seconds")
	}
	code, stdout, _ := runJob(t, "--pipeline=streaming", "--count=20")
	require.Equal(t, 0, code)
	assert.Contains(t, stdout, "streaming on prism")
	assert.Contains(t, stdout, "output topic: 20 messages for 20 distinct orders")
}

func TestRunGivesUpAtTimeout(t *testing.T) {
	var out, errb bytes.Buffer
	start := time.Now()
	code := run(context.Background(), []string{"--timeout=20ms", "--count=20000", "--output=" + filepath.Join(t.TempDir(), "o.jsonl")}, &out, &errb)
	assert.Equal(t, 1, code)
	assert.Contains(t, errb.String(), "the job did not end within --timeout=20ms; it was cancelled in the runner")
	assert.Less(t, time.Since(start), 10*time.Second)
}

// Bad input never merges or vanishes: two orders whose ids differ only in
// bytes that are not UTF-8 are both dead-lettered (decoded, both would be
// "u\uFFFD1", one key), with their bytes; a blank line, a line with data
// after its object and a good line are each accounted for, and the summary
// adds them up, file by file.
func TestRunAccountsForEveryLineAndNeverMergesKeysThatAreNotUTF8(t *testing.T) {
	dir := t.TempDir()
	a := "{\"order_id\":\"u\xff1\",\"created_at\":\"2026-01-01T00:00:00Z\"}\n" +
		"{\"order_id\":\"u\xfe1\",\"created_at\":\"2026-01-01T00:00:00Z\"}\n" +
		"\n" +
		"{\"order_id\":\"o-1\",\"created_at\":\"2026-01-01T00:00:00Z\"}}\n" +
		"{\"order_id\":\"o-2\",\"created_at\":\"2026-01-01T00:00:01Z\"}\n"
	b := "{\"order_id\":\"o-2\",\"created_at\":\"2026-01-01T00:00:01Z\"}\n{\"order_id\":\"o-3\",\"created_at\":\"2026-01-01T00:00:02Z\"}\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.jsonl"), []byte(a), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "b.jsonl"), []byte(b), 0o644))
	out := filepath.Join(t.TempDir(), "out.jsonl")
	code, stdout, stderr := runJob(t, "--input="+filepath.Join(dir, "*.jsonl"), "--output="+out)
	require.Equal(t, 0, code, stderr)
	for _, want := range []string{
		filepath.Join(dir, "a.jsonl") + " 5: 1 rows, 1 blank, 3 malformed\n",
		filepath.Join(dir, "b.jsonl") + " 2: 2 rows, 0 blank, 0 malformed\n",
		"lines               7: 3 rows, 1 blank, 3 malformed\n",
		"every line          7 = 2 emitted + 1 duplicates dropped + 3 dead-lettered + 1 blank\n",
	} {
		assert.Contains(t, stdout, want)
	}
	errs, err := os.ReadFile(filepath.Join(filepath.Dir(out), "out.errors.jsonl"))
	require.NoError(t, err)
	var kept []string
	for line := range strings.SplitSeq(strings.TrimSpace(string(errs)), "\n") {
		var e struct {
			LineBase64 string `json:"line_base64"`
			Reason     string `json:"reason"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &e))
		if e.LineBase64 != "" {
			raw, err := base64.StdEncoding.DecodeString(e.LineBase64)
			require.NoError(t, err)
			kept = append(kept, string(raw))
			assert.Contains(t, e.Reason, "not valid UTF-8")
		}
	}
	assert.ElementsMatch(t, strings.Split(a, "\n")[:2], kept, "the original bytes of both lines")
}

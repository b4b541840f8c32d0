package flinktest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/internal/flinkrest"
	"github.com/beamdedup/beamdedup/internal/jobrun"
	"github.com/beamdedup/beamdedup/testing/flinktest"
)

// What the tests of a job's state on the cluster share (restore,
// failover, rescale): a job's end and its counters, its checkpoints and
// subtasks from Flink's REST API, where its rows went (this process
// for LOOPBACK workers, PostgreSQL for PROCESS workers, whose outputs
// never reach the test), and the SDK worker processes of a TaskManager.

// waitMetrics waits for the job's end and returns its result, which
// carries the counters of the job's last attempt.
func waitMetrics(t *testing.T, j *jobrun.Job) beam.PipelineResult {
	t.Helper()
	pr, err := j.Wait()
	require.NoError(t, err, "the job ends without an error")
	require.NotNil(t, pr, "the job's result, with its metrics")
	return pr
}

// awaitEnd waits for a streaming job that ends by itself, its sources
// having read their last element (the job server ends a job once its
// splittable sources have; a stop with a savepoint then races the end,
// and Flink refuses one for a finished job: "is not a streaming job"),
// and returns its result; past timeout it fails the test.
func awaitEnd(t *testing.T, j *jobrun.Job, timeout time.Duration) beam.PipelineResult {
	t.Helper()
	select {
	case <-j.Done():
	case <-time.After(timeout):
		t.Fatalf("the job still runs %v after its sources read their last element", timeout)
	}
	return waitMetrics(t, j)
}

// checkpointsOf reads the job's checkpoints from Flink's REST API.
func checkpointsOf(t *testing.T, id string) (flinkrest.Checkpoints, error) {
	return rest(t).Checkpoints(context.Background(), id)
}

// awaitCheckpoints waits until the job has completed n more checkpoints
// than after, and returns its statistics then.
func awaitCheckpoints(t *testing.T, id string, after, n int) flinkrest.Checkpoints {
	t.Helper()
	var cs flinkrest.Checkpoints
	flinktest.Await(t, 2*time.Minute, fmt.Sprintf("%d completed checkpoints after %d", n, after), func() bool {
		var err error
		cs, err = checkpointsOf(t, id)
		return err == nil && cs.Counts.Completed >= after+n
	})
	return cs
}

// subtasksOf returns the subtasks of the job's vertices whose names
// contain name.
func subtasksOf(t *testing.T, id, name string) []flinkrest.Subtask {
	t.Helper()
	ctx := context.Background()
	fj, err := rest(t).Job(ctx, id)
	require.NoError(t, err)
	var out []flinkrest.Subtask
	for _, v := range fj.Vertices {
		if strings.Contains(v.Name, name) {
			sts, err := rest(t).Subtasks(ctx, id, v.ID)
			require.NoError(t, err)
			out = append(out, sts...)
		}
	}
	return out
}

// allRunning reports whether the job is RUNNING with every task running
// or (an impulse) finished.
func allRunning(t *testing.T, id string) bool {
	fj, err := rest(t).Job(context.Background(), id)
	if err != nil || fj.State != "RUNNING" {
		return false
	}
	for _, v := range fj.Vertices {
		if v.Status != "RUNNING" && v.Status != "FINISHED" {
			return false
		}
	}
	return true
}

// wallCollectFn records each row as JSON with the wall-clock time it
// passed, in this process (LOOPBACK workers): the processing time of the
// steps fused with it.
type wallCollectFn struct{ Name string }

type walled struct {
	Row string
	At  time.Time
}

var wallRows struct {
	sync.Mutex
	rows map[string][]walled
}

func (f *wallCollectFn) ProcessElement(row beam.X) {
	b, err := json.Marshal(row)
	if err != nil {
		panic(err)
	}
	wallRows.Lock()
	defer wallRows.Unlock()
	if wallRows.rows == nil {
		wallRows.rows = map[string][]walled{}
	}
	wallRows.rows[f.Name] = append(wallRows.rows[f.Name], walled{string(b), time.Now()})
}

// wallRowsOf returns what wallCollectFn recorded under name, in the order
// it came.
func wallRowsOf(name string) []walled {
	wallRows.Lock()
	defer wallRows.Unlock()
	return slices.Clone(wallRows.rows[name])
}

// pgLogFn appends each row, as JSON, to a table of PostgreSQL (job int,
// row text, at timestamptz), a bundle's rows in one statement when the
// bundle finishes: the outputs of PROCESS workers, every copy of a row
// that a replay emits again included.
type pgLogFn struct {
	DSN, Table string
	Job        int

	rows []string
}

func (f *pgLogFn) StartBundle() { f.rows = f.rows[:0] }

func (f *pgLogFn) ProcessElement(row beam.X) error {
	b, err := json.Marshal(row)
	if err != nil {
		return err
	}
	f.rows = append(f.rows, string(b))
	return nil
}

func (f *pgLogFn) FinishBundle(ctx context.Context) error {
	if len(f.rows) == 0 {
		return nil
	}
	pool, err := logPool(ctx, f.DSN)
	if err != nil {
		return err
	}
	_, err = pool.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (job, row) SELECT $1, unnest($2::text[])`, pgx.Identifier{f.Table}.Sanitize()), f.Job, f.rows)
	return err
}

var logPools struct {
	sync.Mutex
	m map[string]*pgxpool.Pool
}

// logPool is the worker process's connections to dsn.
func logPool(ctx context.Context, dsn string) (*pgxpool.Pool, error) {
	logPools.Lock()
	defer logPools.Unlock()
	if p := logPools.m[dsn]; p != nil {
		return p, nil
	}
	p, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return nil, err
	}
	if logPools.m == nil {
		logPools.m = map[string]*pgxpool.Pool{}
	}
	logPools.m[dsn] = p
	return p, nil
}

func init() {
	register.DoFn1x0[beam.X](&wallCollectFn{})
	register.DoFn1x1[beam.X, error](&pgLogFn{})
}

// logged is a row of a pgLogFn's table.
type logged struct {
	Job int
	Row string
	At  time.Time
}

// createLogs creates a pgLogFn table of each name.
func createLogs(t *testing.T, conn *pgx.Conn, names ...string) {
	t.Helper()
	for _, n := range names {
		_, err := conn.Exec(context.Background(), fmt.Sprintf(
			`CREATE TABLE %s (job int NOT NULL, row text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())`, pgx.Identifier{n}.Sanitize()))
		require.NoError(t, err)
	}
}

// readLog returns a pgLogFn table's rows in the order they were written.
func readLog(t *testing.T, conn *pgx.Conn, table string) []logged {
	t.Helper()
	rows, err := conn.Query(context.Background(), fmt.Sprintf(`SELECT job, row, at FROM %s ORDER BY at`, pgx.Identifier{table}.Sanitize()))
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (logged, error) {
		var l logged
		return l, r.Scan(&l.Job, &l.Row, &l.At)
	})
	require.NoError(t, err)
	return out
}

// countLog counts a pgLogFn table's rows of distinct rows.
func countLog(t *testing.T, conn *pgx.Conn, table string) (rows, distinct int) {
	t.Helper()
	err := conn.QueryRow(context.Background(), fmt.Sprintf(`SELECT count(*), count(DISTINCT row) FROM %s`, pgx.Identifier{table}.Sanitize())).Scan(&rows, &distinct)
	require.NoError(t, err)
	return rows, distinct
}

// descendants are the processes under pid, children first.
func descendants(pid int) []int {
	parent := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 2 {
			continue
		}
		pp, _ := strconv.Atoi(f[1])
		parent[pp] = append(parent[pp], p)
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		out = append(out, parent[p]...)
		queue = append(queue, parent[p]...)
	}
	return out
}

// sdkWorkers are the SDK worker processes a TaskManager started for PROCESS
// environments: the processes under it that Beam's boot loader started
// with --worker=true.
func sdkWorkers(tm *flinktest.Process) []int {
	var out []int
	for _, p := range descendants(tm.Pid()) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
		if err == nil && slices.Contains(strings.Split(string(b), "\x00"), "--worker=true") {
			out = append(out, p)
		}
	}
	return out
}

// killWorkersOf kills what is left of the SDK workers and boot loaders under
// the cluster's TaskManagers once a test's PROCESS jobs ended: Beam's job
// server leaves them running after a stop with a savepoint (the worker of
// the Kafka trial ran on for minutes, evidence/kafka-trial.md).
func killWorkersOf(c *flinktest.Cluster) int {
	n := 0
	for _, tm := range c.TaskManagers() {
		for _, p := range descendants(tm.Pid()) {
			if syscall.Kill(p, syscall.SIGKILL) == nil {
				n++
			}
		}
	}
	return n
}

// load is the machine's load average over the last minute, for the logs
// of what a test measured.
func load() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0]
}

// startJob submits p as start does and, if the test fails, logs what Flink
// says went wrong with the job: its task failures (the REST API's
// exception history) and the causes in the live TaskManagers' logs.
func startJob(t *testing.T, p *beam.Pipeline, o jobrun.Options) *jobrun.Job {
	t.Helper()
	j := start(t, p, o)
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if id, err := j.FlinkJobID(ctx); err == nil {
			failures, _ := exceptions(ctx, rest(t), id)
			for i, f := range failures[:min(len(failures), 3)] {
				t.Logf("Flink job %s, task failure %d of %d:\n%s", id, i+1, len(failures), headLines(f, 15))
			}
		}
		c := flinktest.SharedCluster(t)
		if jobs, err := rest(t).Jobs(ctx); err == nil {
			var running []string
			for _, fj := range jobs {
				if !fj.Terminal() {
					running = append(running, fmt.Sprintf("%s (%s, %s)", fj.ID, fj.Name, fj.State))
				}
			}
			t.Logf("the cluster's jobs not ended: %v", running)
		}
		var lost []string
		for _, l := range strings.Split(c.JobManager.Output(), "\n") {
			if strings.Contains(l, "TaskManager") && (strings.Contains(l, "heartbeat") || strings.Contains(l, "unreachable") ||
				strings.Contains(l, "isconnect") || strings.Contains(l, "Registering") || strings.Contains(l, "lost")) {
				lost = append(lost, l)
			}
		}
		if len(lost) > 0 {
			t.Logf("the JobManager's log, its TaskManagers:\n%s", strings.Join(lost[max(0, len(lost)-15):], "\n"))
		}
		for _, tm := range c.TaskManagers() {
			var causes []string
			for _, l := range strings.Split(tm.Output(), "\n") {
				if strings.HasPrefix(l, "Caused by:") && !slices.Contains(causes, l) {
					causes = append(causes, l)
				}
			}
			if len(causes) > 0 {
				t.Logf("%s's log, the causes:\n%s", tm.Name, strings.Join(causes[max(0, len(causes)-10):], "\n"))
			}
		}
	})
	return j
}

func headLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(len(lines), n)], "\n")
}

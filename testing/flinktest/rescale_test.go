package flinktest_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/internal/flinkopts"
	"github.com/beamdedup/beamdedup/internal/flinkrest"
	"github.com/beamdedup/beamdedup/internal/jobrun"
	"github.com/beamdedup/beamdedup/testing/flinktest"
	"github.com/beamdedup/beamdedup/testing/pgtest"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// toRescaleRow is tick n of the rescale stream as a row with an event
// time eventLead after the tick's.
func toRescaleRow(et beam.EventTime, n int64) restoreRow {
	return restoreRow{Key: streamKey(n), N: n, Ts: et.ToTime().Add(eventLead)}
}

func init() { register.Function2x1(toRescaleRow) }

// Rescale from a savepoint: the stream of the failover test (20 old keys
// resent every 4 s among new ones) into a watermarkless and an event-time
// KeepFirst, run at parallelism 1, stopped with a savepoint mid-stream,
// restored at parallelism 2, stopped again and restored at parallelism 1,
// the max parallelism (the key groups) pinned to 8 in every job, the SDK
// workers processes of the TaskManagers (PROCESS), each job's rows logged
// into PostgreSQL. After each rescale every key's state is found where the
// key groups moved: the resends of every key seen before the savepoint
// are dropped, the keys first seen after it are emitted, and the
// event-time candidates pending at it are emitted once. Each rescaled job
// restores without allow_non_restored_state (the job server gives the
// impulse an operator uid, which Beam's runner does not:
// TestBeamDefect_TheStockRunnersImpulseHasNoUIDSoARescaledRestoreIsRefused),
// so its source reads on from the savepoint and reads no tick again.
func TestRescale_FromASavepoint1To2To1FindsEveryKeysState(t *testing.T) {
	c := flinktest.SharedCluster(t)
	t.Cleanup(func() {
		if n := killWorkersOf(c); n > 0 {
			t.Logf("killed %d SDK worker and boot loader processes left under the TaskManagers after the jobs", n)
		}
	})
	ctx := context.Background()
	dsn := pgtest.Shared(t).NewDatabase(t)
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	createLogs(t, conn, "read", "arrival", "evented")

	// The ticks begin about when the first job has started and outlast
	// the first two jobs (some 20 s each); the third reads them to their
	// end.
	const every = 50 * time.Millisecond
	begin := time.Now().Add(10 * time.Second)
	total := int64(75 * time.Second / every)
	first := map[string]int64{}
	for n := range total {
		if k := streamKey(n); !has(first, k) {
			first[k] = n
		}
	}
	steps := []string{"arrival", "evented"}
	build := func(job int) *beam.Pipeline {
		p, s := beam.NewPipelineWithRoot()
		rows := beam.ParDo(s, toRescaleRow, flinktest.Ticks(s, begin, begin.Add(time.Duration(total)*every), every))
		beam.ParDo0(s.Scope("ReadLog"), &pgLogFn{DSN: dsn, Table: "read", Job: job}, rows)
		out := map[string]beam.PCollection{
			"arrival": dedup.KeepFirst(s, rows, rowspec.PartitionBy("key"), dedup.UID("arrival")).Rows,
			"evented": dedup.KeepFirst(s, rows, rowspec.PartitionBy("key"), rowspec.OnTime("ts"), dedup.UID("evented")).Rows,
		}
		for _, step := range steps {
			beam.ParDo0(s.Scope(step+"Log"), &pgLogFn{DSN: dsn, Table: step, Job: job}, out[step])
		}
		return p
	}
	readBy := func(job int) int {
		var n int
		require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM read WHERE job = $1`, job).Scan(&n))
		return n
	}
	maxReadBy := func(job int) int64 {
		var n *int64
		require.NoError(t, conn.QueryRow(ctx, `SELECT max((row::json->>'n')::bigint) FROM read WHERE job = $1`, job).Scan(&n))
		if n == nil {
			return -1
		}
		return *n
	}
	keysOut := func(step string) int {
		var n int
		require.NoError(t, conn.QueryRow(ctx, fmt.Sprintf(`SELECT count(DISTINCT row) FROM %s`, step)).Scan(&n))
		return n
	}

	base := process(t, jobrun.Options{StallLimit: -1, Flink: flinkopts.Options{
		Streaming: true, CheckpointingInterval: 2 * time.Second, MaxParallelism: 8}})
	parallelism := []int{1, 2, 1}
	var path string
	var results []beam.PipelineResult
	for i, par := range parallelism {
		job := i + 1
		o := base
		o.Parallelism, o.Flink.SavepointPath = par, path
		submitted := time.Now()
		j := startJob(t, build(job), o)
		id := flinkJob(t, j)
		t.Logf("job %d at parallelism %d running %v after its submission (load %s)", job, par, time.Since(submitted).Round(100*time.Millisecond), load())
		fj, err := rest(t).Job(ctx, id)
		require.NoError(t, err)
		for _, v := range fj.Vertices {
			if slices.ContainsFunc(steps, func(uid string) bool { return containsStep(v.Name, uid) }) {
				assert.Equal(t, par, v.Parallelism, "job %d: the parallelism of %s", job, v.Name)
				assert.Equal(t, 8, v.MaxParallelism, "job %d: the max parallelism of %s", job, v.Name)
			}
		}
		if path != "" {
			cs, err := checkpointsOf(t, id)
			require.NoError(t, err)
			require.NotNil(t, cs.Latest.Restored, "job %d restored the savepoint", job)
			assert.Equal(t, path, cs.Latest.Restored.ExternalPath)
		}
		if job < len(parallelism) {
			// Every old key resent in this job: 80 ticks past the savepoint.
			from := int64(0)
			if job > 1 {
				from = maxReadBy(job - 1)
			}
			flinktest.Await(t, 2*time.Minute, fmt.Sprintf("80 ticks read by job %d past the savepoint", job), func() bool { return maxReadBy(job) >= from+80 })
			if job > 1 {
				// The event-time candidates pending at the savepoint are
				// emitted once this job's watermark passes them, which on a
				// loaded machine lags its reads: its savepoint waits for
				// them, so that each is pending at one savepoint only.
				want := 0
				for _, n := range first {
					if n <= from {
						want++
					}
				}
				flinktest.Await(t, 2*time.Minute, fmt.Sprintf("the candidates pending at job %d's savepoint emitted by job %d", job-1, job), func() bool {
					var n int
					require.NoError(t, conn.QueryRow(ctx, `SELECT count(DISTINCT row::json->>'key') FROM evented WHERE (row::json->>'n')::bigint <= $1`, from).Scan(&n))
					return n == want
				})
			}
			if par > 1 {
				// Flink's REST API refreshes its metrics every second; the
				// deadline is the other waits' (a TaskManager the failover
				// test replaced may still be starting its SDK workers).
				flinktest.Await(t, 2*time.Minute, fmt.Sprintf("rows into each of job %d's arrival subtasks", job), func() bool {
					sts := subtasksOf(t, id, "{arrival")
					return len(sts) == par && !slices.ContainsFunc(sts, func(st flinkrest.Subtask) bool { return st.Metrics.ReadRecords == 0 })
				})
			}
			stopAt := time.Now()
			path, err = j.StopWithSavepoint(ctx, "", time.Minute)
			require.NoError(t, err)
			t.Logf("job %d stopped with a savepoint in %v (load %s)", job, time.Since(stopAt).Round(100*time.Millisecond), load())
		} else {
			flinktest.Await(t, 3*time.Minute, "every tick read and every key out of each step", func() bool {
				var read int
				require.NoError(t, conn.QueryRow(ctx, `SELECT count(DISTINCT row) FROM read`).Scan(&read))
				return int64(read) == total && keysOut("arrival") == len(first) && keysOut("evented") == len(first)
			})
			// Every tick read: the source has ended, and the job with it.
			results = append(results, awaitEnd(t, j, 2*time.Minute))
			continue
		}
		results = append(results, waitMetrics(t, j))
	}

	// What each job read: the first job ticks 0 to its stop; each restored
	// one those after, from the tick after the last the job before read (a
	// stop with a savepoint replays nothing), none of them again: its
	// impulse, restored, does not emit again.
	var lastRead []int64
	reads := readLog(t, conn, "read")
	for job := 1; job <= len(parallelism); job++ {
		var ns []int64
		for _, l := range reads {
			if l.Job == job {
				ns = append(ns, rowOf(t, l.Row).N)
			}
		}
		require.NotEmpty(t, ns, "job %d read ticks", job)
		slices.Sort(ns)
		require.Equal(t, len(ns), len(slices.Compact(slices.Clone(ns))), "job %d read no tick twice", job)
		from := int64(0)
		if len(lastRead) > 0 {
			from = lastRead[len(lastRead)-1] + 1
		}
		require.Equal(t, seq(ns[len(ns)-1] + 1)[from:], ns, "job %d read every tick from %d (the savepoint's position) to its last, and no other", job, from)
		lastRead = append(lastRead, ns[len(ns)-1])
	}
	require.Equal(t, total-1, lastRead[len(lastRead)-1], "every tick read")
	outs, emittedBy := map[string][]logged{}, map[string]map[string]int{}
	for _, step := range steps {
		outs[step], emittedBy[step] = readLog(t, conn, step), map[string]int{}
		for _, l := range outs[step] {
			emittedBy[step][rowOf(t, l.Row).Key] = l.Job
		}
	}

	for b := 1; b < len(parallelism); b++ {
		t.Run(fmt.Sprintf("%d to %d", parallelism[b-1], parallelism[b]), func(t *testing.T) {
			job, before := b+1, lastRead[b-1]
			// The keys first seen before the savepoint and read again after
			// it: each of them resent, each dropped.
			resent := map[string]bool{}
			for _, l := range reads {
				if r := rowOf(t, l.Row); l.Job == job && first[r.Key] <= before {
					resent[r.Key] = true
				}
			}
			for _, step := range steps {
				pending, after := 0, 0
				for _, l := range outs[step] {
					if l.Job != job {
						continue
					}
					r := rowOf(t, l.Row)
					switch {
					case first[r.Key] > before:
						after++
					case step == "evented":
						pending++ // read before the savepoint, final after it
						assert.Greater(t, r.N, lastReadBefore(lastRead, b-1), "%s: %s pending at the savepoint, not at an earlier one", step, r.Key)
					default:
						t.Errorf("%s: %s, first seen before the savepoint, emitted again by job %d", step, r.Key, job)
					}
				}
				// The keys first seen by this job, emitted by it, but for the
				// event-time candidates pending at its own stop.
				want := 0
				for k, n := range first {
					if n > before && n <= lastRead[b] && !(step == "evented" && emittedBy[step][k] == job+1) {
						want++
					}
				}
				assert.Equal(t, want, after, "%s: the keys first seen by job %d, emitted by it", step, job)
				if step == "evented" {
					assert.Positive(t, pending, "evented: candidates pending at the savepoint, emitted by job %d", job)
				}
				cn := dedup.CountersOf(results[b], step)
				assert.Equal(t, int64(readBy(job)), cn.RowsIn, "%s: rows into job %d", step, job)
				t.Logf("%s in job %d (parallelism %d): %d keys first seen before the savepoint resent and dropped, %d first seen after it emitted, %d candidates pending at it emitted; counters %d in, %d emitted, %d dropped",
					step, job, parallelism[b], len(resent), after, pending, cn.RowsIn, cn.Emitted, cn.DuplicatesDropped)
			}
			assert.GreaterOrEqual(t, len(resent), 20, "every old key resent after the savepoint")
		})
	}
	t.Run("every key once across the jobs, its first row", func(t *testing.T) {
		for _, step := range steps {
			got := map[string]int64{}
			for _, l := range outs[step] {
				r := rowOf(t, l.Row)
				assert.False(t, has(got, r.Key), "%s: %s emitted twice", step, r.Key)
				got[r.Key] = r.N
			}
			assert.Equal(t, first, got, step)
		}
	})
}

// lastReadBefore is the last tick read by the job before job b (-1: none).
func lastReadBefore(lastRead []int64, b int) int64 {
	if b == 0 {
		return -1
	}
	return lastRead[b-1]
}

// containsStep reports whether a Flink vertex's name holds the stateful
// stage of the dedup step of that UID ("[3]{arrival, arrivalLog}").
func containsStep(vertex, uid string) bool { return strings.Contains(vertex, "{"+uid+",") }

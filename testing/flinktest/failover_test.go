package flinktest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"syscall"
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
	"github.com/beamdedup/beamdedup/transforms/pgsink"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// streamKey is the key of tick n of the failover and rescale streams:
// every fourth tick resends one of 20 "old" keys, all seen in the first
// four seconds and each resent every 80 ticks; the others make "new" keys,
// each on three ticks in a row.
func streamKey(n int64) string {
	if n%4 == 0 {
		return fmt.Sprintf("old%02d", n/4%20)
	}
	return fmt.Sprintf("new%05d", n/4)
}

func toStreamTick(n int64) tick { return tick{Key: streamKey(n), N: n} }

func init() { register.Function1x1(toStreamTick) }

// failover is a failure the failover test caused and Flink's recovery.
type failover struct {
	what      string
	killed    time.Time // when the process was killed
	lastCheck int64     // the last checkpoint completed before the kill
	restored  int64     // the checkpoint the job restored
	triggered time.Time // when that checkpoint was triggered
	running   time.Time // when every task ran again
}

// Failover from a checkpoint, as a production job meets it: the stream
// (a tick every 50 ms into a watermarkless KeepFirst, into PostgreSQL with
// pgsink) at parallelism 2 with a checkpoint every 2 s, its SDK workers
// processes of the TaskManagers (PROCESS); kill -9 of the SDK worker
// process running the source while rows are in flight, then, once Flink
// restored the job from its last completed checkpoint, kill -9 of the
// TaskManager running the source. The SDK worker goes first: its job restarts in
// seconds, where a TaskManager's waits for a replacement, so both kills
// fall within the ticks on a loaded machine too. Each failover
// restores from a checkpoint completed before the kill; at the end (a
// drain) the table holds every key's first row and nothing else (no row
// lost), the restored state dropped the resends of the keys seen before
// the checkpoint (the counters of the last attempt), and the output's
// doubles (a log of every row the dedup step emitted) are keys first
// emitted between the restored checkpoint and the kill, no more.
func TestFailover_OfATaskManagerAndOfAnSDKWorkerLosesNoRowAndKeepsTheState(t *testing.T) {
	c := flinktest.SharedCluster(t)
	t.Cleanup(func() {
		if n := killWorkersOf(c); n > 0 {
			t.Logf("killed %d SDK worker and boot loader processes left under the TaskManagers after the job", n)
		}
		_, err := c.Replenish(2)
		assert.NoError(t, err, "the cluster's TaskManagers replenished")
	})
	ctx := context.Background()
	_, err := c.Replenish(2)
	require.NoError(t, err)
	pg := pgtest.Shared(t)
	dsn := pg.NewDatabase(t)
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `CREATE TABLE kept (key text PRIMARY KEY, n bigint NOT NULL)`)
	require.NoError(t, err)
	createLogs(t, conn, "read", "emitted")

	// The ticks begin about when the job has started (ticks due before
	// then come at once) and outlast both failovers (some 20 s each): the
	// job ends once every tick is in the table, stopped as it is. (A drain
	// does not end: at the end of its input Beam's runner resumes the
	// source again and again until its last tick is due.)
	const every = 50 * time.Millisecond
	begin := time.Now().Add(15 * time.Second)
	total := int64(80 * time.Second / every)
	first := map[string]int64{}
	for n := range total {
		if k := streamKey(n); !has(first, k) {
			first[k] = n
		}
	}
	p, s := beam.NewPipelineWithRoot()
	rows := beam.ParDo(s, toStreamTick, flinktest.Ticks(s, begin, begin.Add(time.Duration(total)*every), every))
	beam.ParDo0(s.Scope("ReadLog"), &pgLogFn{DSN: dsn, Table: "read"}, rows)
	kept := dedup.KeepFirst(s, rows, rowspec.PartitionBy("key"), dedup.UID("failover")).Rows
	beam.ParDo0(s.Scope("EmittedLog"), &pgLogFn{DSN: dsn, Table: "emitted"}, kept)
	pgsink.Write(s, kept, pgsink.DSN(dsn), pgsink.Table("kept"), rowspec.PartitionBy("key"), pgsink.UID("kept"))

	o := process(t, jobrun.Options{StallLimit: -1, Parallelism: 2, Flink: flinkopts.Options{
		Streaming: true, CheckpointingInterval: 2 * time.Second, MaxParallelism: 8}})
	j := startJob(t, p, o)
	id := flinkJob(t, j)
	emitted := func() int {
		n, _ := countLog(t, conn, "emitted")
		return n
	}
	flinktest.Await(t, time.Minute, "rows out of the dedup step", func() bool { return emitted() > 0 })

	var failovers []failover
	// kill kills a process of the job once it has completed 2 more
	// checkpoints with rows flowing, and waits until Flink restored the
	// job from a checkpoint and rows flow again.
	kill := func(t *testing.T, what string, victim func() (string, func())) {
		cs, err := checkpointsOf(t, id)
		require.NoError(t, err)
		cs = awaitCheckpoints(t, id, cs.Counts.Completed, 2)
		_, read := countLog(t, conn, "read")
		require.Less(t, int64(read), total-40, "rows in flight at the kill: the ticks must not have ended (the machine is slower than the test's schedule)")
		// In flight: rows emitted after that checkpoint, before the next.
		before := emitted()
		flinktest.Await(t, time.Minute, "rows emitted after the checkpoint", func() bool { return emitted() >= before+5 })
		name, killIt := victim()
		f := failover{what: what + " " + name, lastCheck: cs.Latest.Completed.ID, killed: time.Now()}
		before = emitted()
		killIt()
		flinktest.Await(t, 2*time.Minute, "the job restored and running", func() bool {
			cs2, err := checkpointsOf(t, id)
			if err != nil || cs2.Counts.Restored <= cs.Counts.Restored || cs2.Latest.Restored == nil || !allRunning(t, id) {
				return false
			}
			f.restored = cs2.Latest.Restored.ID
			if c, ok := cs2.Find(f.restored); ok {
				f.triggered = time.UnixMilli(c.Triggered)
			}
			assert.False(t, cs2.Latest.Restored.IsSavepoint, "restored from a checkpoint")
			return true
		})
		f.running = time.Now()
		flinktest.Await(t, time.Minute, "rows out of the restored job", func() bool { return emitted() > before })
		assert.GreaterOrEqual(t, f.restored, f.lastCheck, "restored from the last checkpoint completed before the kill, or a later one")
		require.False(t, f.triggered.IsZero(), "checkpoint %d in the history", f.restored)
		t.Logf("%v into the ticks, %s killed; restored from checkpoint %d (the last completed before the kill: %d), every task running %v after the kill, rows out %v after it (load %s)",
			f.killed.Sub(begin).Round(time.Second), f.what, f.restored, f.lastCheck, f.running.Sub(f.killed).Round(100*time.Millisecond), time.Since(f.killed).Round(100*time.Millisecond), load())
		failovers = append(failovers, f)
	}
	// source is the TaskManager running the subtask that reads the ticks.
	source := func(t *testing.T) *flinktest.Process {
		var busy flinkrest.Subtask
		for _, st := range subtasksOf(t, id, "flinktest.Ticks, ") {
			if st.Status == "RUNNING" && st.Metrics.WriteRecords >= busy.Metrics.WriteRecords {
				busy = st
			}
		}
		for _, tm := range c.TaskManagers() {
			if tm.Name == busy.TaskManager {
				return tm
			}
		}
		t.Fatalf("no live TaskManager %q runs the source", busy.TaskManager)
		return nil
	}

	t.Run("of an SDK worker", func(t *testing.T) {
		kill(t, "SDK worker", func() (string, func()) {
			tm := source(t)
			workers := sdkWorkers(tm)
			require.NotEmpty(t, workers, "%s runs SDK worker processes", tm.Name)
			return fmt.Sprintf("%v of %s", workers, tm.Name), func() {
				for _, w := range workers {
					syscall.Kill(w, syscall.SIGKILL)
				}
			}
		})
	})
	t.Run("of a TaskManager", func(t *testing.T) {
		kill(t, "TaskManager", func() (string, func()) {
			tm := source(t)
			// Killed with its process group (its boot loaders and SDK
			// workers), and replaced, as a cluster manager replaces a lost
			// TaskManager: the restarted job may not find the slots it
			// needs on the other one alone (NoResourceAvailableException
			// until the restarts ran out, in 2 of 6 CI runs).
			return tm.Name, func() {
				tm.Kill()
				_, err := c.Replenish(2)
				require.NoError(t, err, "a TaskManager started in place of the killed one")
			}
		})
	})

	flinktest.Await(t, 3*time.Minute, "every tick read and every key in the table", func() bool {
		_, read := countLog(t, conn, "read")
		var inTable int
		require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM kept`).Scan(&inTable))
		return int64(read) == total && inTable == len(first)
	})
	// Every tick read: the source has ended, and the job with it.
	pr := awaitEnd(t, j, 2*time.Minute)

	t.Run("no row lost: the table holds each key's first row", func(t *testing.T) {
		rs, err := conn.Query(ctx, `SELECT key, n FROM kept`)
		require.NoError(t, err)
		got := map[string]int64{}
		for rs.Next() {
			var k string
			var n int64
			require.NoError(t, rs.Scan(&k, &n))
			got[k] = n
		}
		require.NoError(t, rs.Err())
		assert.Equal(t, first, got)
		sc := pgsink.CountersOf(pr, "kept")
		assert.Zero(t, sc.Unaccounted(), "pgsink: every row accounted for, %+v", sc)
		assert.Zero(t, sc.DeadLettered, "pgsink: no dead letter")
	})

	t.Run("the restored state drops the resends of keys seen before the checkpoint", func(t *testing.T) {
		require.NotEmpty(t, failovers)
		// The counters are the last attempt's: from the checkpoint it
		// restored, tick from on, to the end.
		cn := dedup.CountersOf(pr, "failover")
		from := total - cn.RowsIn
		require.Positive(t, from, "the last attempt started from a checkpoint, not from the beginning (%+v)", cn)
		var keysAfter, resends int64
		for k, n := range first {
			if n >= from {
				keysAfter++
			}
			_ = k
		}
		for n := from; n < total; n++ {
			if first[streamKey(n)] < from {
				resends++
			}
		}
		assert.Equal(t, keysAfter, cn.Emitted, "emitted by the last attempt: the keys first seen after its checkpoint")
		assert.Equal(t, cn.RowsIn-cn.Emitted, cn.DuplicatesDropped, "every other row dropped")
		assert.Positive(t, resends)
		assert.GreaterOrEqual(t, cn.DuplicatesDropped, resends, "the resends of keys seen before the checkpoint among them")
		// The ticks the counters say the last attempt read were read after
		// its restore.
		lastRestore := failovers[len(failovers)-1].killed
		reread := map[int64]bool{}
		for _, l := range readLog(t, conn, "read") {
			if l.At.After(lastRestore) {
				reread[rowOf(t, l.Row).N] = true
			}
		}
		for n := from; n < total; n++ {
			if !reread[n] {
				t.Errorf("tick %d, after the last attempt's checkpoint, not read after the kill", n)
				break
			}
		}
		t.Logf("the last attempt from tick %d of %d: %d rows in, %d emitted, %d dropped (%d resends of keys first seen before its checkpoint)",
			from, total, cn.RowsIn, cn.Emitted, cn.DuplicatesDropped, resends)
	})

	// The subtasks a kill spares emit on until Flink restarts the job, and a
	// restored job emits those rows again: a double is a row emitted between
	// the restored checkpoint's trigger and the restored job's start.
	t.Run("doubles are keys emitted between the restored checkpoint and the restored job's start", func(t *testing.T) {
		logs := readLog(t, conn, "emitted")
		firstAt, count := map[string]time.Time{}, map[string]int{}
		for _, l := range logs {
			k := rowOf(t, l.Row).Key
			if !has(firstAt, k) {
				firstAt[k] = l.At
			}
			count[k]++
		}
		assert.Len(t, count, len(first), "every key emitted")
		doubles, bound := 0, 0
		for _, f := range failovers {
			for _, l := range logs {
				if !l.At.Before(f.triggered) && l.At.Before(f.running) {
					bound++
				}
			}
		}
		for k, n := range count {
			if n == 1 {
				continue
			}
			doubles += n - 1
			at := firstAt[k]
			assert.True(t, slices.ContainsFunc(failovers, func(f failover) bool { return !at.Before(f.triggered) && at.Before(f.running) }),
				"%s emitted %d times, first at %v: between a restored checkpoint's trigger and the restored job's start", k, n, at.Format("15:04:05.000"))
		}
		assert.LessOrEqual(t, doubles, bound, "doubles, at most the rows emitted between each restored checkpoint and the restored job's start")
		var spans []string
		for _, f := range failovers {
			spans = append(spans, fmt.Sprintf("%s: checkpoint %d triggered %v before the kill", f.what, f.restored, f.killed.Sub(f.triggered).Round(10*time.Millisecond)))
		}
		t.Logf("%d rows emitted for %d keys: %d doubles, at most %d emitted between the restored checkpoints and the restored jobs' starts (%s)",
			len(logs), len(count), doubles, bound, strings.Join(spans, "; "))
	})
}

// rowOf decodes a logged tick.
func rowOf(t *testing.T, s string) tick {
	t.Helper()
	var r tick
	require.NoError(t, json.Unmarshal([]byte(s), &r))
	return r
}

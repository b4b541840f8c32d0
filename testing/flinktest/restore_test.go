package flinktest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/internal/jobrun"
	"github.com/beamdedup/beamdedup/pipelines/jobrun/flinkopts"
	"github.com/beamdedup/beamdedup/testing/flinktest"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// restoreRow is a tick of the restore test as a row: even ticks resend
// one of ten "old" keys, all seen in the first four seconds; odd ticks
// make "new" keys, each on four ticks 0.8 s apart, so that later ones are
// first seen after any savepoint. Ts is the tick's time plus eventLead:
// an event-time step holds a key's candidate that long before the
// watermark reaches it.
type restoreRow struct {
	Key string    `beam:"key" json:"key"`
	N   int64     `beam:"n" json:"n"`
	Ts  time.Time `beam:"ts" json:"-"`
}

const eventLead = 3 * time.Second

func toRestoreRow(et beam.EventTime, n int64) restoreRow {
	key := fmt.Sprintf("old%d", n/2%10)
	if n%2 == 1 {
		key = fmt.Sprintf("new%04d", n/8)
	}
	return restoreRow{Key: key, N: n, Ts: et.ToTime().Add(eventLead)}
}

func init() {
	registerTypes(restoreRow{})
	register.Function2x1(toRestoreRow)
}

// The restore test of the spec (seed 000, §6) on a real savepoint: a
// stream of ticks into a watermarkless and an event-time KeepFirst, at
// parallelism 1, stopped with a savepoint mid-stream and submitted again
// from it, the same pipeline with the same UIDs, until its ticks end.
// Across the two jobs every key comes out of each step exactly once, its
// first row: a key seen before the savepoint is not emitted again when
// it is resent after the restore (its resends dropped by restored
// state), a key first seen after it is emitted by the second job, and an
// event-time candidate pending at the savepoint (its row read by the
// first job, its watermark not yet reached) is emitted once, by the
// second job, when the watermark passes it.
//
// It runs only with BEAMDEDUP_FLINK_RESTORE=1: on this cluster the stop
// with a savepoint of this pipeline does not complete. With a StateTTL on
// the event-time step, a timer's bundle failed reading its state
// ("Unknown process bundle instruction id") while the savepoint was
// taken, and the job restarted; without one, the savepoint was aborted
// ("Stop-with-savepoint failed", a task's notifyCheckpointAbort), both
// within a minute. The single-step savepoint of
// TestFlinkOptions_EachTakesEffectOnTheClusterAndASavepointIsRestored
// completes. Until the cause is found the seed's restore cases are not
// shown on Flink (docs/flink-cluster.md).
func TestKeepFirst_RestoredFromASavepointEmitsEveryKeyOnceAcrossTheStop(t *testing.T) {
	if os.Getenv("BEAMDEDUP_FLINK_RESTORE") != "1" {
		t.Skip("the stop with a savepoint of this pipeline does not complete on the tests' cluster (see the test's comment); BEAMDEDUP_FLINK_RESTORE=1 runs it")
	}
	flinktest.SharedCluster(t) // started before the ticks' clock
	// The ticks begin once the first job has surely started (a job's
	// start takes up to half a minute on a loaded machine, and ticks due
	// before it would arrive at once) and last long enough that a stop
	// with a savepoint (some seconds: the source's states, defect 22)
	// leaves ticks for the second job.
	const every = 200 * time.Millisecond
	begin := time.Now().Add(15 * time.Second)
	end := begin.Add(90 * time.Second)
	total := int(end.Sub(begin) / every)
	build := func(job int) *beam.Pipeline {
		p, s := beam.NewPipelineWithRoot()
		rows := beam.ParDo(s, toRestoreRow, flinktest.Ticks(s, begin, end, every))
		arrival := dedup.KeepFirst(s, rows, rowspec.PartitionBy("key"), dedup.UID("arrival")).Rows
		evented := dedup.KeepFirst(s, rows, rowspec.PartitionBy("key"), rowspec.OnTime("ts"), dedup.UID("evented")).Rows
		beam.ParDo0(s.Scope("ReadRows"), &collectFn{Name: fmt.Sprintf("restore-read-%d", job)}, rows)
		beam.ParDo0(s.Scope("ArrivalOut"), &collectFn{Name: fmt.Sprintf("restore-arrival-%d", job)}, arrival)
		beam.ParDo0(s.Scope("EventedOut"), &collectFn{Name: fmt.Sprintf("restore-evented-%d", job)}, evented)
		return p
	}
	o := jobrun.Options{StallLimit: -1, Flink: flinkopts.Options{Streaming: true}}
	ctx := context.Background()

	j1 := start1(t, build(1), o)
	await(t, 3*time.Minute, "40 ticks read by the first job", func() bool { return len(rowsOf("restore-read-1")) >= 40 })
	path, err := j1.StopWithSavepoint(ctx, "", time.Minute)
	require.NoError(t, err)
	_, err = j1.Wait()
	require.NoError(t, err, "a job stopped with a savepoint ends without an error")
	read1 := ticksOf(t, rowsOf("restore-read-1"))
	last1 := read1[len(read1)-1]
	require.Less(t, int(last1), total-40, "the first job read nearly every tick before its stop: the test needs ticks after it")

	o.Flink.SavepointPath = path
	j2 := start1(t, build(2), o)
	_, err = j2.Wait()
	require.NoError(t, err, "the restored job runs until its ticks end")

	read2 := ticksOf(t, rowsOf("restore-read-2"))
	require.NotEmpty(t, read2, "ticks read after the restore")
	assert.Equal(t, last1+1, read2[0], "the restored job reads on from the first job's last tick")
	assert.Len(t, append(read1, read2...), total, "every tick read once, by one of the jobs")

	first := map[string]int64{} // each key's first tick
	for n := range int64(total) {
		r := toRestoreRow(beam.EventTime(0), n)
		if _, ok := first[r.Key]; !ok {
			first[r.Key] = n
		}
	}
	for _, step := range []string{"arrival", "evented"} {
		t.Run(step, func(t *testing.T) {
			out1 := keptOf(t, rowsOf("restore-"+step+"-1"))
			out2 := keptOf(t, rowsOf("restore-"+step+"-2"))
			kept := map[string]int64{}
			for k, n := range out1 {
				kept[k] = n
			}
			var resentOld, firstAfter, pending int
			for k, n := range out2 {
				_, twice := kept[k]
				assert.False(t, twice, "%s came out of both jobs", k)
				kept[k] = n
				if first[k] > last1 {
					firstAfter++
				} else {
					pending++
				}
			}
			assert.Equal(t, first, kept, "every key once across the two jobs, its first row")
			for k := range out1 {
				if strings.HasPrefix(k, "old") {
					resentOld++
				}
			}
			assert.Equal(t, 10, resentOld, "the old keys come out of the first job, their resends after the restore dropped")
			assert.Positive(t, firstAfter, "keys first seen after the savepoint, emitted by the second job")
			if step == "arrival" {
				assert.Zero(t, pending, "a watermarkless step emits a key's first row when it reads it")
			} else {
				assert.Positive(t, pending, "event-time candidates pending at the savepoint, emitted once after the restore")
			}
			t.Logf("%s: %d keys by the first job, %d by the second (%d first seen after the savepoint, %d pending at it); first job read ticks 0-%d of %d",
				step, len(out1), len(out2), firstAfter, pending, last1, total)
		})
	}
}

// start1 submits p and waits until it runs on the cluster.
func start1(t *testing.T, p *beam.Pipeline, o jobrun.Options) *jobrun.Job {
	t.Helper()
	j := start(t, p, o)
	flinkJob(t, j)
	return j
}

// ticksOf returns the tick numbers of collected restoreRows, in order.
func ticksOf(t *testing.T, rows []string) []int64 {
	var ns []int64
	for _, r := range rows {
		var row restoreRow
		require.NoError(t, json.Unmarshal([]byte(r), &row))
		ns = append(ns, row.N)
	}
	slices.Sort(ns)
	return ns
}

// keptOf returns the collected rows of a step by key, failing on a key
// seen twice.
func keptOf(t *testing.T, rows []string) map[string]int64 {
	out := map[string]int64{}
	for _, r := range rows {
		var row restoreRow
		require.NoError(t, json.Unmarshal([]byte(r), &row))
		_, dup := out[row.Key]
		assert.False(t, dup, "%s emitted twice by one job", row.Key)
		out[row.Key] = row.N
	}
	return out
}

package flinktest_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/internal/flinkopts"
	"github.com/beamdedup/beamdedup/internal/jobrun"
	"github.com/beamdedup/beamdedup/testing/flinktest"
	"github.com/beamdedup/beamdedup/testing/jobservertest"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// markedProcesses returns the processes whose environment holds
// BEAMDEDUP_WORKER_MARK=mark (a PROCESS environment's env reaches the
// command the TaskManager runs, its boot loader and the SDK worker), with
// each one's parent, read from /proc.
func markedProcesses(mark string) map[int]int {
	want := []byte("BEAMDEDUP_WORKER_MARK=" + mark + "\x00")
	out := map[int]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !bytes.Contains(append(env, 0), want) {
			continue
		}
		out[pid] = parentOf(pid)
	}
	return out
}

// parentOf is a process's parent (/proc/PID/stat's fourth field), 0 when
// it is gone.
func parentOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// pid (comm) state ppid ...: comm may hold spaces, not a ')'.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// descendsFrom reports whether pid's ancestors include ancestor.
func descendsFrom(pid, ancestor int) bool {
	for p := parentOf(pid); p > 1; p = parentOf(p) {
		if p == ancestor {
			return true
		}
	}
	return false
}

// alive are the pids of still running among pids.
func alive(mark string, pids []int) []int {
	now := markedProcesses(mark)
	var out []int
	for _, p := range pids {
		if _, ok := now[p]; ok {
			out = append(out, p)
		}
	}
	return out
}

// A job's PROCESS workers (the command the TaskManager runs, Beam Go's
// boot loader and the SDK worker it starts) end with the job: when it is
// stopped with a savepoint, when it is cancelled, and when the
// TaskManager that started them is killed (kill -9): Beam's runner kills
// only the boot loader, which leaves the worker running with no parent,
// and nothing stops either when the TaskManager dies (the job server runs
// each under a shell that kills the boot loader's process group when told
// to stop or when the TaskManager is gone). Each worker is found through
// /proc by a mark in its environment; each end is followed by a bounded
// wait for the marked processes to be gone.
func TestWorkers_NoneLeftRunningWhenTheJobStopsIsCancelledOrLosesItsTaskManager(t *testing.T) {
	const gone = 30 * time.Second // Beam stops a worker within 2 s; the shell checks its TaskManager every second
	c := flinktest.SharedCluster(t)
	ctx := context.Background()
	exe, err := os.Executable()
	require.NoError(t, err)
	jobservertest.RemoveBootCopies(t, exe)
	submit := func(t *testing.T, mark string) *jobrun.Job {
		p, s := beam.NewPipelineWithRoot()
		dedup.KeepFirst(s, ticks(s, time.Hour), rowspec.PartitionBy("key"), dedup.UID("ticks"))
		boot, err := jobservertest.BootLoader()
		require.NoError(t, err)
		j := start(t, p, jobrun.Options{StallLimit: -1, EnvironmentType: "PROCESS", WorkerBinary: exe,
			EnvironmentConfig: fmt.Sprintf(`{"command":%q,"env":{"BEAMDEDUP_WORKER_MARK":%q}}`, boot, mark),
			Flink:             flinkopts.Options{Streaming: true}})
		flinkJob(t, j)
		// The boot loader and the SDK worker it started, at least.
		flinktest.Await(t, time.Minute, "the job's workers running", func() bool { return len(markedProcesses(mark)) >= 2 })
		return j
	}
	awaitGone := func(t *testing.T, mark, after string, pids []int) {
		t.Helper()
		began := time.Now()
		flinktest.Await(t, gone, fmt.Sprintf("no worker process left %s (%v)", after, pids), func() bool { return len(alive(mark, pids)) == 0 })
		t.Logf("%d worker processes gone %v %s", len(pids), time.Since(began).Round(100*time.Millisecond), after)
	}

	t.Run("stopped with a savepoint", func(t *testing.T) {
		mark := fmt.Sprintf("stop-%d", time.Now().UnixNano())
		j := submit(t, mark)
		pids := keys(markedProcesses(mark))
		_, err := j.StopWithSavepoint(ctx, "", time.Minute)
		require.NoError(t, err)
		_, err = j.Wait()
		require.NoError(t, err)
		awaitGone(t, mark, "after the stop with a savepoint", pids)
	})
	t.Run("TaskManager killed, then cancelled", func(t *testing.T) {
		mark := fmt.Sprintf("kill-%d", time.Now().UnixNano())
		j := submit(t, mark)
		var victim *flinktest.Process
		var orphans []int
		for _, tm := range c.TaskManagers() {
			for pid := range markedProcesses(mark) {
				if descendsFrom(pid, tm.Pid()) {
					victim = tm
					orphans = append(orphans, pid)
				}
			}
			if victim != nil {
				break
			}
		}
		require.NotNil(t, victim, "a TaskManager that started the job's workers")
		// kill -9 of the TaskManager's JVM alone, as a user or an OOM
		// killer does (Process.Kill would take its process group along).
		require.NoError(t, syscall.Kill(victim.Pid(), syscall.SIGKILL))
		<-victim.Done()
		awaitGone(t, mark, "after their TaskManager was killed", orphans)
		// The job restarts on the other TaskManager, with workers of its
		// own: a cancel ends them.
		flinktest.Await(t, 2*time.Minute, "the job's workers running again after the restart", func() bool {
			return len(markedProcesses(mark)) >= 2
		})
		require.NoError(t, j.Cancel())
		j.Wait()
		awaitGone(t, mark, "after the cancel", keys(markedProcesses(mark)))
	})
}

func keys(m map[int]int) []int {
	var out []int
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

package flinktest_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/internal/flinkopts"
	"github.com/beamdedup/beamdedup/internal/flinkserver"
	"github.com/beamdedup/beamdedup/internal/jobrun"
	"github.com/beamdedup/beamdedup/testing/flinktest"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// tick is a row of a test's stream: a periodic impulse's tick, keyed.
type tick struct {
	Key string `beam:"key" json:"key"`
	N   int64  `beam:"n" json:"n"`
}

func init() {
	registerTypes(tick{})
	register.Function1x1(toTick)
	register.Function1x1(indexTick)
	register.DoFn1x1[tick, tick](&freezeFn{})
	register.DoFn1x1[tick, tick](&gateFn{})
}

// tickEvery is the interval of the tests' periodic impulses.
const tickEvery = 100 * time.Millisecond

// toTick keys a tick by its index: 20 keys, each seen every 2 s.
func toTick(n int64) tick { return tick{Key: fmt.Sprintf("k%02d", n%20), N: n} }

func indexTick(n int) tick { return tick{Key: fmt.Sprintf("k%05d", n%5000), N: int64(n)} }

// ticks is an unbounded stream of keyed ticks, every tickEvery from now
// for d.
func ticks(s beam.Scope, d time.Duration) beam.PCollection {
	now := time.Now()
	return beam.ParDo(s, toTick, flinktest.Ticks(s, now, now.Add(d), tickEvery))
}

// Where the cluster listens while a job runs. Flink's own listeners (the
// JobManager's and each TaskManager's RPC, data, blob, REST and metrics
// ports) and the job server's are bound to the loopback interface. The
// servers a TaskManager opens for a job's SDK workers (Beam's Fn API
// control, data, state, logging, artifact and provisioning services) are
// bound to every interface, whatever the configuration says: Beam 2.62.0's
// ServerFactory builds them with NettyServerBuilder.forPort
// (notes/beam-defects.md, 21). The second subtest fails the day Beam binds
// them to loopback.
func TestCluster_ListenersWhileAJobRuns(t *testing.T) {
	c := flinktest.SharedCluster(t) // started before the ticks' clock
	before := map[string][]netip.AddrPort{}
	for _, proc := range c.Processes() {
		ls, err := flinkserver.Listeners(proc.Pid())
		require.NoError(t, err, proc.Name)
		before[proc.Name] = ls
	}
	p, s := beam.NewPipelineWithRoot()
	dedup.KeepFirst(s, ticks(s, time.Hour), rowspec.PartitionBy("key"), dedup.UID("ticks"))
	j := start(t, p, jobrun.Options{})
	flinkJob(t, j)
	during := map[string][]netip.AddrPort{}
	for _, proc := range c.Processes() {
		ls, err := flinkserver.Listeners(proc.Pid())
		require.NoError(t, err, proc.Name)
		during[proc.Name] = ls
	}
	require.NoError(t, j.Cancel())
	_, err := j.Wait()
	require.NoError(t, err)

	t.Run("flink and the job server: loopback", func(t *testing.T) {
		// A TaskManager's own listeners are those it had before any job;
		// servers it opened for earlier jobs may still be open.
		for _, tm := range c.TaskManagers() {
			require.NotEmpty(t, tm.Startup, tm.Name)
			for _, l := range tm.Startup {
				assert.True(t, l.Addr().IsLoopback(), "%s listens on %v", tm.Name, l)
			}
		}
		for _, name := range []string{c.JobManager.Name, c.JobServer.Name()} {
			require.NotEmpty(t, before[name], name)
			for _, l := range before[name] {
				assert.True(t, l.Addr().IsLoopback(), "%s listens on %v", name, l)
			}
			for _, l := range during[name] {
				assert.True(t, l.Addr().IsLoopback(), "%s listens on %v while a job runs", name, l)
			}
		}
	})
	t.Run("beam defect 21: a TaskManager's Fn API servers listen on every interface", func(t *testing.T) {
		var opened []netip.AddrPort
		for name, ls := range during {
			for _, l := range ls {
				if !slices.Contains(before[name], l) {
					opened = append(opened, l)
				}
			}
		}
		require.NotEmpty(t, opened, "a TaskManager opens servers for the job's SDK workers")
		for _, l := range opened {
			assert.True(t, l.Addr().IsUnspecified(), "opened for the job: %v", l)
		}
		t.Logf("opened for the job: %v", opened)
	})
}

// Each Flink option a Go job sets (jobrun.Options.Flink, the flags of
// internal/flinkopts) is the job's on the cluster, read back from
// Flink's REST API; a stop with a savepoint writes one, and a job
// submitted with it as --savepoint_path starts from it.
func TestFlinkOptions_EachTakesEffectOnTheClusterAndASavepointIsRestored(t *testing.T) {
	c := flinktest.SharedCluster(t) // started before the ticks' clock
	build := func() *beam.Pipeline {
		p, s := beam.NewPipelineWithRoot()
		dedup.KeepFirst(s, ticks(s, time.Hour), rowspec.PartitionBy("key"), dedup.UID("ticks"))
		return p
	}
	o := process(t, jobrun.Options{Parallelism: 2, Flink: flinkopts.Options{
		MaxParallelism: 64, CheckpointingInterval: time.Second, CheckpointingMode: "AT_LEAST_ONCE",
		StateBackend: "rocksdb", StateBackendStoragePath: c.Checkpoints,
	}})
	j := start(t, build(), o)
	id := flinkJob(t, j)
	ctx := context.Background()
	cfg, err := jobConfig(ctx, rest(t), id)
	require.NoError(t, err)
	assert.Equal(t, 2, cfg.Parallelism, "parallelism")
	fj, err := rest(t).Job(ctx, id)
	require.NoError(t, err)
	for _, v := range fj.Vertices {
		assert.Equal(t, 64, v.MaxParallelism, "max parallelism of %s", v.Name)
	}
	cc, err := checkpointConfig(ctx, rest(t), id)
	require.NoError(t, err)
	assert.Equal(t, "at_least_once", cc.Mode)
	assert.Equal(t, int64(1000), cc.Interval)
	assert.Contains(t, cc.StateBackend, "RocksDB")
	flinktest.Await(t, time.Minute, "a completed checkpoint", func() bool {
		cp, err := rest(t).Checkpoints(ctx, id)
		return err == nil && cp.Counts.Completed > 0
	})

	path, err := j.StopWithSavepoint(ctx, "", time.Minute)
	require.NoError(t, err)
	_, err = j.Wait()
	require.NoError(t, err, "a job stopped with a savepoint ends without an error")
	_, err = os.Stat(strings.TrimPrefix(strings.TrimPrefix(path, "file:"), "//"))
	require.NoError(t, err, "the savepoint %s", path)

	o.Flink.SavepointPath = path
	j2 := start(t, build(), o)
	id2 := flinkJob(t, j2)
	cp, err := rest(t).Checkpoints(ctx, id2)
	require.NoError(t, err)
	require.NotNil(t, cp.Latest.Restored, "the job restored a savepoint")
	assert.True(t, cp.Latest.Restored.IsSavepoint)
	assert.Equal(t, path, cp.Latest.Restored.ExternalPath)
}

// freezeFn passes rows on until its Freeze-th, where it blocks until the
// test releases it: an SDK worker that stops making progress.
type freezeFn struct {
	Name   string
	Freeze int64
	n      int64
}

var frozen struct {
	sync.Mutex
	release map[string]chan struct{}
}

func (f *freezeFn) ProcessElement(r tick) tick {
	if f.n++; f.n == f.Freeze {
		frozen.Lock()
		ch := frozen.release[f.Name]
		frozen.Unlock()
		<-ch
	}
	return r
}

// gateFn passes a row on once the test gives it a token: a healthy job
// whose pace the test sets. The test opens the gate when the job has
// ended, releasing a worker a cancelled job left behind.
type gateFn struct {
	Name string
}

var gates struct {
	sync.Mutex
	tokens map[string]chan struct{}
	open   map[string]chan struct{}
}

func (f *gateFn) ProcessElement(r tick) tick {
	gates.Lock()
	tokens, open := gates.tokens[f.Name], gates.open[f.Name]
	gates.Unlock()
	select {
	case <-tokens:
	case <-open:
	}
	return r
}

// The watchdog on Flink reads the job's progress from Flink's REST API:
// a healthy job longer than the stall limit runs to its end, in batch
// and in streaming mode, and a job whose SDK worker freezes is cancelled
// within the limit, the stall naming the running tasks. (The limit
// covers a job's start too: from submission until its first task runs
// takes some seconds with nothing to count.) A healthy job's length does
// not depend on the machine's speed: a stream ticks for two stall limits
// and ends with its ticks; a batch job passes its rows one at a time, a
// token each from the test (each key's rows are a bundle of their own in
// Flink's batch translation of a stateful step, its counts reported when
// it ends), 250 ms apart: longer than the limit, whatever the machine.
func TestWatchdog_OnTheClusterLetsAHealthyJobEndAndCancelsAFrozenOne(t *testing.T) {
	const limit = 8 * time.Second
	for _, tc := range []struct {
		name   string
		stream bool
		freeze bool
	}{
		{"healthy batch", false, false},
		{"healthy stream", true, false},
		{"frozen batch", false, true},
		{"frozen stream", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			flinktest.SharedCluster(t) // started before the ticks' clock
			name := strings.ReplaceAll(t.Name(), "/", "-")
			p, s := beam.NewPipelineWithRoot()
			var rows beam.PCollection
			// A paced batch job takes at least keys tokens 250 ms apart: 12 s.
			rowsIn, keys := 96, 48
			if tc.stream {
				// A healthy stream ticks for two stall limits and ends, its
				// job with it (the ticks' end passes the watermark to the
				// end of time); a frozen one ticks on.
				d := time.Hour
				if !tc.freeze {
					d = 2 * limit
				}
				rows = ticks(s, d)
				rowsIn, keys = int(d/tickEvery), 20
			} else {
				var ns []any
				for i := range rowsIn {
					ns = append(ns, i%keys)
				}
				rows = beam.ParDo(s, indexTick, beam.Create(s, ns...))
			}
			release := make(chan struct{})
			frozen.Lock()
			if frozen.release == nil {
				frozen.release = map[string]chan struct{}{}
			}
			frozen.release[name] = release
			frozen.Unlock()
			defer close(release)
			freezeAt := int64(-1)
			if tc.freeze {
				freezeAt = 20
			}
			rows = beam.ParDo(s.Scope("Freezer"), &freezeFn{Name: name, Freeze: freezeAt}, rows)
			kept := dedup.KeepFirst(s, rows, rowspec.PartitionBy("key"), dedup.AsStream(), dedup.UID("watched")).Rows
			paced := !tc.stream && !tc.freeze
			tokens, open := make(chan struct{}), make(chan struct{})
			if paced {
				gates.Lock()
				if gates.tokens == nil {
					gates.tokens, gates.open = map[string]chan struct{}{}, map[string]chan struct{}{}
				}
				gates.tokens[name], gates.open[name] = tokens, open
				gates.Unlock()
				kept = beam.ParDo(s.Scope("Gate"), &gateFn{Name: name}, kept)
			}
			out := collect(s, kept, false)
			all := collect(s, rows, false)
			began := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			j, err := jobrun.Start(ctx, p, options(t, jobrun.Options{StallLimit: limit, Flink: flinkopts.Options{Streaming: tc.stream}}))
			require.NoError(t, err)
			if paced {
				go func() {
					defer close(open)
					for {
						select {
						case tokens <- struct{}{}:
						case <-j.Done():
							return
						}
						time.Sleep(250 * time.Millisecond)
					}
				}()
			}
			_, err = j.Wait()
			took := time.Since(began)
			if !tc.freeze {
				require.NoError(t, err)
				assert.Greater(t, took, limit, "the job ran longer than the stall limit")
				assert.Len(t, rowsOf(all), rowsIn, "rows into the dedup step")
				assert.Len(t, rowsOf(out), keys, "rows out: one per key")
				return
			}
			var st *jobrun.Stall
			require.True(t, errors.As(err, &st), "a stall, got %v", err)
			assert.Contains(t, err.Error(), "Freezer", "the stall names the running task")
			t.Logf("%v after %v", err, took.Round(time.Second))
		})
	}
}

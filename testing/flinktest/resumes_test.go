package flinktest_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/rtrackers/offsetrange"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/internal/flinkopts"
	"github.com/beamdedup/beamdedup/internal/flinkrest"
	"github.com/beamdedup/beamdedup/internal/flinkserver"
	"github.com/beamdedup/beamdedup/internal/jobrun"
	"github.com/beamdedup/beamdedup/testing/flinktest"
)

// spinSpec is a splittable source of Parts restrictions of Each positions
// that claims one position a call and asks to be resumed after Delay: a
// source resumed Parts*Each times, as fast as the runner resumes it.
type spinSpec struct {
	Name        string
	Parts, Each int64
	DelayMs     int64
}

// spinFn is spinSpec's splittable DoFn; it counts its calls by Name
// (resumes), in this process: LOOPBACK workers.
type spinFn struct{}

func (*spinFn) CreateInitialRestriction(s spinSpec) offsetrange.Restriction {
	return offsetrange.Restriction{Start: 0, End: s.Parts * s.Each}
}

func (*spinFn) SplitRestriction(s spinSpec, r offsetrange.Restriction) []offsetrange.Restriction {
	var out []offsetrange.Restriction
	for start := r.Start; start < r.End; start += s.Each {
		out = append(out, offsetrange.Restriction{Start: start, End: min(start+s.Each, r.End)})
	}
	return out
}

func (*spinFn) RestrictionSize(_ spinSpec, r offsetrange.Restriction) float64 {
	return float64(r.End - r.Start)
}

func (*spinFn) CreateTracker(r offsetrange.Restriction) *sdf.LockRTracker {
	return sdf.NewLockRTracker(offsetrange.NewTracker(r))
}

func (*spinFn) ProcessElement(_ context.Context, rt *sdf.LockRTracker, s spinSpec, emit func(int64)) (sdf.ProcessContinuation, error) {
	resumes.add(s.Name)
	i := rt.GetRestriction().(offsetrange.Restriction).Start
	if !rt.TryClaim(i) {
		return sdf.StopProcessing(), rt.GetError()
	}
	emit(i)
	if rt.IsDone() {
		return sdf.StopProcessing(), rt.GetError()
	}
	return sdf.ResumeProcessingIn(time.Duration(s.DelayMs) * time.Millisecond), nil
}

// spin is a source of s: its positions.
func spin(s beam.Scope, spec spinSpec) beam.PCollection {
	s = s.Scope("spin." + spec.Name)
	return beam.ParDo(s, &spinFn{}, beam.Create(s, spec))
}

// resumes counts spinFn's calls by source, with the time of each.
var resumes resumeLog

type resumeLog struct {
	sync.Mutex
	at map[string][]time.Time
}

func (l *resumeLog) add(name string) {
	l.Lock()
	defer l.Unlock()
	if l.at == nil {
		l.at = map[string][]time.Time{}
	}
	l.at[name] = append(l.at[name], time.Now())
}

// of returns the times of name's calls so far.
func (l *resumeLog) of(name string) []time.Time {
	l.Lock()
	defer l.Unlock()
	return append([]time.Time(nil), l.at[name]...)
}

func init() {
	register.DoFn4x2[context.Context, *sdf.LockRTracker, spinSpec, func(int64), sdf.ProcessContinuation, error](&spinFn{})
	register.Emitter1[int64]()
	beam.RegisterType(reflect.TypeOf(spinSpec{}))
}

// goOptions sets Go options (Beam's PipelineOptions: the job server lifts
// those named after a Flink runner option) for the jobs submitted until
// the function it returns is called.
func goOptions(opts map[string]string) func() {
	for k, v := range opts {
		beam.PipelineOptions.Set(k, v)
	}
	return func() {
		for k := range opts {
			beam.PipelineOptions.Set(k, "")
		}
	}
}

// Beam's Flink runner (2.62.0) registers a keyed state for every
// resumption of a splittable source (apache/beam#27648), and the heap
// backend refuses to snapshot more than 32,767: a source resumed once a
// second stops every checkpoint after about nine hours. The job server
// keeps a stage's residuals in one map state. A source of 200 restrictions
// that each resume at once (small bundles: 5 ms) passes 40,000 resumes of
// its one subtask in seconds, on the heap backend with a checkpoint every
// second: checkpoints triggered after the 40,000th resume complete, and
// the latest holds a handful of keyed states per operator, not one per
// resume. A second source asks to be resumed after 250 ms each time: the
// job server keeps the sub-second delay (Beam's runner drops it, and
// resumes such a source at once).
func TestResumes_CheckpointsKeepCompletingPast40000ResumesOfOneSource(t *testing.T) {
	const past = 40000
	fast := spinSpec{Name: "fast", Parts: 200, Each: 2000, DelayMs: 0} // 400,000 resumes
	paced := spinSpec{Name: "paced", Parts: 1, Each: 1000, DelayMs: 250}
	p, s := beam.NewPipelineWithRoot()
	spin(s, fast)
	spin(s, paced)
	restore := goOptions(map[string]string{"max_bundle_time_mills": "5",
		"externalized_checkpoints_enabled": "true", "retain_externalized_checkpoints_on_cancellation": "true"})
	j := start(t, p, jobrun.Options{StallLimit: -1, Flink: flinkopts.Options{Streaming: true, CheckpointingInterval: time.Second}})
	id := flinkJob(t, j)
	restore()
	ctx := context.Background()
	flinktest.Await(t, 3*time.Minute, fmt.Sprintf("%d resumes of the fast source", past), func() bool { return len(resumes.of(fast.Name)) >= past })
	passed := resumes.of(fast.Name)[past-1]
	t.Logf("%d resumes in %v from the first", past, passed.Sub(resumes.of(fast.Name)[0]).Round(time.Millisecond))
	var cp flinkrest.Checkpoints
	flinktest.Await(t, time.Minute, "two checkpoints triggered after the 40,000th resume, completed", func() bool {
		var err error
		cp, err = rest(t).Checkpoints(ctx, id)
		require.NoError(t, err)
		completed := 0
		for _, c := range cp.History {
			if c.Triggered > passed.UnixMilli() {
				require.NotEqual(t, "FAILED", c.Status, "checkpoint %d, triggered after the 40,000th resume: %s", c.ID, c.FailureMessage)
				if c.Status == "COMPLETED" {
					completed++
				}
			}
		}
		return completed >= 2
	})
	t.Logf("checkpoints: %d completed, %d failed; fast source: %d resumes", cp.Counts.Completed, cp.Counts.Failed, len(resumes.of(fast.Name)))
	for _, c := range cp.History {
		if c.Status == "FAILED" {
			t.Logf("checkpoint %d failed (triggered %v before the 40,000th resume): %s", c.ID,
				passed.Sub(time.UnixMilli(c.Triggered)).Round(time.Millisecond), c.FailureMessage)
		}
	}
	// The cluster keeps the latest checkpoint only, and the job's is
	// retained when it is cancelled: read it then.
	require.NoError(t, j.Cancel())
	j.Wait()
	cp, err := rest(t).Checkpoints(ctx, id)
	require.NoError(t, err)
	path := strings.TrimPrefix(strings.TrimPrefix(cp.Latest.Completed.ExternalPath, "file:"), "//")
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(path)) })
	states, err := flinkserver.CheckpointStates(path)
	require.NoError(t, err)
	require.NotEmpty(t, states)
	for op, st := range states {
		t.Logf("operator %s: %d keyed states: %s", op, st.States, strings.Join(st.Names, ", "))
		assert.Less(t, st.States, 20, "keyed states of operator %s", op)
	}
	gaps := resumes.of(paced.Name)
	require.Greater(t, len(gaps), 10, "the paced source's resumes")
	for i := 1; i < len(gaps); i++ {
		assert.GreaterOrEqual(t, gaps[i].Sub(gaps[i-1]), 245*time.Millisecond, "resume %d of the paced source came early", i)
	}
}

// Without checkpoints, on the job server, a splittable source is resumed
// after the delay it asked for, and the job ends when the source has: the
// impulse waits for the job's splittable sources instead of ending at once,
// and the source's stage fires a resumption when it is due, not at end of
// input (Beam's runner fires them at once:
// TestBeamDefect_WithoutCheckpointsTheStockRunnerResumesASourceAtOnceAtEndOfInput).
func TestResumes_WithoutCheckpointsASourceIsResumedAfterTheDelayItAskedFor(t *testing.T) {
	paced := spinSpec{Name: "paced-none", Parts: 1, Each: 8, DelayMs: 250}
	p, s := beam.NewPipelineWithRoot()
	spin(s, paced)
	j := start(t, p, jobrun.Options{StallLimit: -1, Flink: flinkopts.Options{Streaming: true, CheckpointingInterval: flinkopts.NoCheckpoints}})
	_, err := j.Wait()
	require.NoError(t, err, "the job ends once its source has")
	calls := resumes.of(paced.Name)
	require.Len(t, calls, 8, "a call a position")
	for i := 1; i < len(calls); i++ {
		assert.GreaterOrEqual(t, calls[i].Sub(calls[i-1]), 245*time.Millisecond, "resume %d came early", i)
	}
}

// With checkpoints every 100 ms against a bundle time of 10 s, a splittable
// source fed by the impulse starts under the job server's default,
// finish_bundle_before_checkpointing=true: the impulse stage's first
// bundle is finished before each checkpoint's barrier, not buffered in the
// snapshot (notes/beam-defects.md, 27, where a snapshot that comes first
// keeps the source from starting; a race, seen in 2 of 3 runs with the
// option false, so not a test of the suite).
func TestResumes_UnderFrequentCheckpointsASourceStartsWithTheJobServersDefault(t *testing.T) {
	spec := spinSpec{Name: fmt.Sprintf("frequent-%d", time.Now().UnixNano()), Parts: 1, Each: 1000, DelayMs: 100}
	p, s := beam.NewPipelineWithRoot()
	spin(s, spec)
	restore := goOptions(map[string]string{"max_bundle_time_mills": "10000"})
	j := start(t, p, jobrun.Options{StallLimit: -1, Flink: flinkopts.Options{Streaming: true, CheckpointingInterval: 100 * time.Millisecond}})
	id := flinkJob(t, j)
	restore()
	flinktest.Await(t, time.Minute, "three completed checkpoints", func() bool {
		cp, err := rest(t).Checkpoints(context.Background(), id)
		return err == nil && cp.Counts.Completed >= 3
	})
	flinktest.Await(t, time.Minute, "the source's first call", func() bool { return len(resumes.of(spec.Name)) > 0 })
}

package bench_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/internal/jobrun"
)

// A bare keyed stateful DoFn (no beamdedup code) that emits a key the first
// time it sees it: Prism splits a stateful bundle inside one key's run of
// elements and then runs the two halves of that key at once
// (notes/beam-defects.md 9 has the reproduction), which the experiment
// every pipeline here runs with turns off. The test below holds that
// workaround.

// firstSeenFn emits a key when its value state is empty, then writes it.
type firstSeenFn struct {
	Seen state.Value[bool]
}

var (
	reproEmitted    = beam.NewCounter("repro", "emitted")
	reproStateReads = beam.NewCounter("repro", "state_reads")
	// stallOnce makes the next element the DoFn processes sleep reproStall
	// (set by a test before its run; Prism runs the SDK harness in process):
	// a bundle with no progress for two progress ticks is what Prism splits.
	stallOnce atomic.Bool
)

// emitLog records which keys firstSeenFn emitted (in process, like
// stallOnce), to name the keys emitted twice.
type emitLog struct {
	mu sync.Mutex
	n  map[string]int
}

func (l *emitLog) add(k string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n[k]++
}

// reset clears the log and returns the keys emitted more than once.
func (l *emitLog) reset() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var twice []string
	for k, n := range l.n {
		if n > 1 {
			twice = append(twice, k)
		}
	}
	l.n = map[string]int{}
	slices.Sort(twice)
	return twice
}

var reproEmits = &emitLog{n: map[string]int{}}

// reproStall is longer than two of Prism's progress ticks (100 ms at first).
const reproStall = 500 * time.Millisecond

func (f *firstSeenFn) ProcessElement(ctx context.Context, sp state.Provider, key string, v int, emit func(string)) error {
	if stallOnce.CompareAndSwap(true, false) {
		time.Sleep(reproStall)
	}
	reproStateReads.Inc(ctx, 1)
	_, seen, err := f.Seen.Read(sp)
	if err != nil {
		return err
	}
	if seen {
		return nil
	}
	reproEmitted.Inc(ctx, 1)
	reproEmits.add(key)
	emit(key)
	return f.Seen.Write(sp, true)
}

// reproKey keys row i as one of keys keys.
type reproKey struct{ Keys int }

func (k *reproKey) ProcessElement(i int) (string, int) { return fmt.Sprintf("k%04d", i%k.Keys), i }

func init() {
	register.DoFn5x1[context.Context, state.Provider, string, int, func(string), error](&firstSeenFn{})
	register.DoFn1x2[int, string, int](&reproKey{})
	register.Emitter1[string]()
}

// splitCounter counts Prism's "split elements" debug records (one per
// split of a bundle, engine.(*stageState).splitBundle) and passes records
// at Info and above to the handler it replaced.
type splitCounter struct {
	next   slog.Handler
	splits *atomic.Int64
}

func (h splitCounter) Enabled(context.Context, slog.Level) bool { return true }

func (h splitCounter) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "split elements" {
		h.splits.Add(1)
		if testing.Verbose() {
			var b strings.Builder
			r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %v", a); return true })
			fmt.Fprintf(os.Stderr, "prism split:%s\n", b.String())
		}
	}
	if r.Level >= slog.LevelInfo && h.next.Enabled(ctx, r.Level) {
		return h.next.Handle(ctx, r)
	}
	return nil
}

func (h splitCounter) WithAttrs(as []slog.Attr) slog.Handler {
	return splitCounter{next: h.next.WithAttrs(as), splits: h.splits}
}

func (h splitCounter) WithGroup(name string) slog.Handler {
	return splitCounter{next: h.next.WithGroup(name), splits: h.splits}
}

// countSplits installs a splitCounter as slog's default handler for the
// rest of the test.
func countSplits(t *testing.T) *atomic.Int64 {
	old := slog.Default()
	n := new(atomic.Int64)
	slog.SetDefault(slog.New(splitCounter{next: old.Handler(), splits: n}))
	t.Cleanup(func() { slog.SetDefault(old) })
	return n
}

// firstSeenRun is one run of firstSeenFn over rows rows of keys keys (all in
// one bundle of the stateful stage) and returns its emissions and state
// reads. stall makes the first element processed sleep reproStall.
func firstSeenRun(t *testing.T, rows, keys int, stall bool) (emitted, reads int64) {
	p, s := beam.NewPipelineWithRoot()
	in := make([]int, rows)
	for i := range in {
		in[i] = i
	}
	kvs := beam.ParDo(s, &reproKey{Keys: keys}, beam.CreateList(s, in))
	beam.ParDo(s, &firstSeenFn{Seen: state.MakeValueState[bool]("seen")}, kvs)
	stallOnce.Store(stall)
	reproEmits.reset()
	pr, _ := runOnPrism(t, p, 2*time.Minute)
	if twice := reproEmits.reset(); len(twice) > 0 {
		t.Logf("keys emitted more than once: %v", twice)
	}
	for _, c := range pr.Metrics().AllMetrics().Counters() {
		switch {
		case c.Namespace() != "repro":
		case c.Name() == "emitted":
			emitted += c.Result()
		case c.Name() == "state_reads":
			reads += c.Result()
		}
	}
	return emitted, reads
}

// TestPrismWithoutSplits_StalledStatefulBundleEmitsEachKeyOnce guards the
// workaround this package's TestMain applies (jobrun.DisableSplits): the
// stalled bundle that Prism otherwise splits (the reproduction above) is
// not split, and each key is emitted once.
func TestPrismWithoutSplits_StalledStatefulBundleEmitsEachKeyOnce(t *testing.T) {
	require.True(t, jobrun.SplitsDisabled(), "TestMain disables splits")
	splits := countSplits(t)
	const rows, keys = 2000, 13 // as in the reproduction
	emitted, reads := firstSeenRun(t, rows, keys, true)
	assert.Zero(t, splits.Load(), "no split")
	assert.Equal(t, int64(keys), emitted, "each key emitted once")
	assert.Equal(t, int64(rows), reads, "one state read per row")
}

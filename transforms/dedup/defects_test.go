package dedup_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/timers"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/stretchr/testify/assert"
)

// Minimal reproductions of the Beam Go 2.77 defects KeepFirst designs
// around (notes/beam-defects.md). They demonstrate the defect, so they are
// skipped unless BEAMDEDUP_REPRO=1; the guards that run in CI are
// TestVariants_* and the TTL/event-time tests.

// twoTimersFn declares two timer families and uses only one.
type twoTimersFn struct {
	Seen  state.Value[bool]
	Fire  timers.EventTime
	Other timers.ProcessingTime
}

func (f *twoTimersFn) ProcessElement(sp state.Provider, tp timers.Provider, k string, v int64, emit func(string)) {
	f.Fire.Set(tp, time.UnixMilli(0).Add(time.Second))
}

func (f *twoTimersFn) OnTimer(ctx context.Context, sp state.Provider, tp timers.Provider, k string, tc timers.Context, emit func(string)) {
	emit(k)
}

func init() {
	register.DoFn5x0[state.Provider, timers.Provider, string, int64, func(string)](&twoTimersFn{})
	register.Emitter1[string]()
}

func TestBeamDefect_TwoTimerFieldsHangAfterTheFirstBundle(t *testing.T) {
	if os.Getenv("BEAMDEDUP_REPRO") == "" {
		t.Skip("reproduction of an upstream defect; set BEAMDEDUP_REPRO=1 to run (takes 30 s)")
	}
	p, s := beam.NewPipelineWithRoot()
	kvs := beam.ParDo(s, splitPair, beam.Create(s, "a=1", "b=2"))
	beam.ParDo(s, &twoTimersFn{Seen: state.MakeValueState[bool]("seen"), Fire: timers.InEventTime("fire"), Other: timers.InProcessingTime("other")}, kvs)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := beam.Run(ctx, "prism", p)
	assert.Error(t, err, "with two timer fields the job does not finish (hangs until the deadline)")
}

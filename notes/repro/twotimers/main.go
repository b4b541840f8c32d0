// Command twotimers reproduces Beam Go's defect 1 of notes/beam-defects.md
// for an upstream report: a stateful DoFn that declares two timer fields,
// of which it sets one, never finishes its job. It runs such a DoFn over
// two elements on Prism, in the process, with a deadline (-deadline, 30 s
// by default), and says whether the job hung:
//
//	go run ./notes/repro/twotimers
//
// It exits 0 when the defect shows (the job hangs until the deadline) and
// 1 when the job finishes: then Beam fixed it, and KeepFirst's one timer
// family per DoFn is no longer needed. It is a reproduction, not a test:
// the guards that run in CI are transforms/dedup's TestVariants_*.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/timers"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"
)

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

func pair(s string, emit func(string, int64)) { emit(s, 1) }

func init() {
	register.DoFn5x0[state.Provider, timers.Provider, string, int64, func(string)](&twoTimersFn{})
	register.Function2x0(pair)
	register.Emitter1[string]()
	register.Emitter2[string, int64]()
}

func main() {
	deadline := flag.Duration("deadline", 30*time.Second, "how long the job may run before it counts as hung")
	flag.Parse()
	beam.Init()
	p, s := beam.NewPipelineWithRoot()
	kvs := beam.ParDo(s, pair, beam.Create(s, "a", "b"))
	beam.ParDo(s, &twoTimersFn{Seen: state.MakeValueState[bool]("seen"), Fire: timers.InEventTime("fire"), Other: timers.InProcessingTime("other")}, kvs)
	ctx, cancel := context.WithTimeout(context.Background(), *deadline)
	defer cancel()
	start := time.Now()
	_, err := beam.Run(ctx, "prism", p)
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		fmt.Printf("defect present: the job with two timer fields did not finish in %v (%v)\n", time.Since(start).Round(time.Millisecond), err)
	case err != nil:
		fmt.Printf("the job failed, which is not this defect: %v\n", err)
		os.Exit(2)
	default:
		fmt.Printf("defect gone: the job finished in %v\n", time.Since(start).Round(time.Millisecond))
		os.Exit(1)
	}
}

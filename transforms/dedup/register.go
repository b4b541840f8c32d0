package dedup

import (
	"context"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/timers"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
)

func init() {
	register.DoFn6x0[context.Context, beam.EventTime, beam.T, keyedEmit, deadEmit, dropEmit](&keyRowsFn{})
	register.DoFn6x0[context.Context, beam.EventTime, beam.T, keyedEmit, deadEmit, dropEmit](&foldRowsFn{})
	register.DoFn6x0[context.Context, beam.EventTime, beam.U, beam.V, func(beam.EventTime, beam.U, beam.V), deadEmit](&keyPairsFn{})
	register.DoFn8x1[context.Context, beam.Window, beam.EventTime, state.Provider, beam.T, beam.V, rowEmit, rowEmit, error](&marksFn{})
	register.DoFn8x1[context.Context, beam.Window, beam.EventTime, state.Provider, beam.T, beam.V, rowEmit, rowEmit, error](&versionsFn{})
	register.DoFn9x1[context.Context, beam.Window, beam.EventTime, state.Provider, timers.Provider, beam.T, beam.V, rowEmit, rowEmit, error](&marksEventFn{})
	register.DoFn9x1[context.Context, beam.Window, beam.EventTime, state.Provider, timers.Provider, beam.T, beam.V, rowEmit, rowEmit, error](&marksProcFn{})
	register.DoFn9x1[context.Context, beam.Window, beam.EventTime, state.Provider, timers.Provider, beam.T, beam.V, rowEmit, rowEmit, error](&versionsEventFn{})
	register.DoFn9x1[context.Context, beam.Window, beam.EventTime, state.Provider, timers.Provider, beam.T, beam.V, rowEmit, rowEmit, error](&versionsProcFn{})
	register.DoFn5x1[beam.EventTime, beam.T, beam.V, candKVEmit, dropKVEmit, error](&toCandidateFn{})
	register.DoFn4x1[context.Context, beam.T, candidate, rowEmit, error](&fromCandidateFn{})
	register.DoFn5x1[context.Context, beam.T, func(*candidate) bool, rowEmit, rowEmit, error](&mergeGroupFn{})
	register.DoFn6x1[context.Context, beam.EventTime, beam.T, candEmit, deadEmit, dropEmit, error](&keyCandidatesFn{})
	register.DoFn7x1[context.Context, beam.Window, beam.EventTime, beam.T, candEmit, deadEmit, dropEmit, error](&windowKeyFn{})
	register.Emitter3[beam.EventTime, []byte, beam.T]()
	register.Emitter2[beam.EventTime, beam.T]()
	register.Emitter3[beam.EventTime, beam.U, beam.V]()
	register.Emitter3[beam.EventTime, beam.T, beam.V]()
	register.Emitter3[beam.EventTime, beam.T, candidate]()
	register.Emitter3[beam.EventTime, []byte, candidate]()
	register.Combiner1[candidate](&candidateMerge{})
	register.Iter1[candidate]()
	// Registered so that the custom coder calls them without reflection.
	register.Function1x1(encodeCandidate)
	register.Function1x2(decodeCandidate)
	beam.RegisterCoder(reflect.TypeFor[candidate](), encodeCandidate, decodeCandidate)
}

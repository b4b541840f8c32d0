package dedup

import (
	"context"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/timers"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/typex"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beamdedup/beamdedup/transforms/internal/dofn"
)

// The DoFns are registered through package dofn, each method once, rather
// than with register.DoFnNxM, whose wrappers for every type-argument list
// doubled the size of a binary that imports this package
// (docs/runners.md has the measurements). Emitters, the iterator and the
// combine keep Beam's register: they instantiate little.

func init() {
	dofn.Register(&keyRowsFn{}, func(fn any) dofn.Methods {
		f := fn.(*keyRowsFn)
		return keyingMethods(f.Setup, f.StartBundle, f.ProcessElement, nil)
	})
	dofn.Register(&foldRowsFn{}, func(fn any) dofn.Methods {
		f := fn.(*foldRowsFn)
		return keyingMethods(f.Setup, f.StartBundle, f.ProcessElement, f.FinishBundle)
	})
	dofn.Register(&keyPairsFn{}, func(fn any) dofn.Methods {
		f := fn.(*keyPairsFn)
		return dofn.Methods{
			"Setup": dofn.F0x1(f.Setup, func() any { return f.Setup() }),
			"ProcessElement": dofn.F6x0(f.ProcessElement, func(ctx, ts, k, v, emit, dead any) {
				f.ProcessElement(ctx.(context.Context), ts.(beam.EventTime), k, v, emit.(func(beam.EventTime, beam.U, beam.V)), dead.(deadEmit))
			}),
		}
	})
	dofn.Register(&marksFn{}, func(fn any) dofn.Methods { f := fn.(*marksFn); return untimedMethods(f.Setup, &f.untimed) })
	dofn.Register(&versionsFn{}, func(fn any) dofn.Methods { f := fn.(*versionsFn); return untimedMethods(f.Setup, &f.untimed) })
	dofn.Register(&marksEventFn{}, func(fn any) dofn.Methods {
		f := fn.(*marksEventFn)
		return timedMethods(f.Setup, f.eventTimed.StartBundle, f.eventTimed.ProcessElement, f.eventTimed.OnTimer, f.eventTimed.FinishBundle)
	})
	dofn.Register(&versionsEventFn{}, func(fn any) dofn.Methods {
		f := fn.(*versionsEventFn)
		return timedMethods(f.Setup, f.eventTimed.StartBundle, f.eventTimed.ProcessElement, f.eventTimed.OnTimer, f.eventTimed.FinishBundle)
	})
	dofn.Register(&marksProcFn{}, func(fn any) dofn.Methods {
		f := fn.(*marksProcFn)
		return timedMethods(f.Setup, f.procTimed.StartBundle, f.procTimed.ProcessElement, f.procTimed.OnTimer, f.procTimed.FinishBundle)
	})
	dofn.Register(&versionsProcFn{}, func(fn any) dofn.Methods {
		f := fn.(*versionsProcFn)
		return timedMethods(f.Setup, f.procTimed.StartBundle, f.procTimed.ProcessElement, f.procTimed.OnTimer, f.procTimed.FinishBundle)
	})
	dofn.Register(&toCandidateFn{}, func(fn any) dofn.Methods {
		f := fn.(*toCandidateFn)
		return dofn.Methods{
			"Setup": dofn.F0x1(f.Setup, func() any { return f.Setup() }),
			"StartBundle": dofn.F2x0(f.StartBundle, func(emit, drop any) {
				f.StartBundle(emit.(candKVEmit), drop.(dropKVEmit))
			}),
			"ProcessElement": dofn.F5x1(f.ProcessElement, func(ts, k, v, emit, drop any) any {
				return f.ProcessElement(ts.(beam.EventTime), k, v, emit.(candKVEmit), drop.(dropKVEmit))
			}),
			"FinishBundle": dofn.F2x1(f.FinishBundle, func(emit, drop any) any {
				return f.FinishBundle(emit.(candKVEmit), drop.(dropKVEmit))
			}),
		}
	})
	dofn.Register(&fromCandidateFn{}, func(fn any) dofn.Methods {
		f := fn.(*fromCandidateFn)
		return dofn.Methods{
			"Setup": dofn.F0x1(f.Setup, func() any { return f.Setup() }),
			"ProcessElement": dofn.F4x1(f.ProcessElement, func(ctx, k, m, emit any) any {
				return f.ProcessElement(ctx.(context.Context), k, m.(candidate), emit.(rowEmit))
			}),
		}
	})
	dofn.Register(&mergeGroupFn{}, func(fn any) dofn.Methods {
		f := fn.(*mergeGroupFn)
		return dofn.Methods{
			"Setup": dofn.F0x1(f.Setup, func() any { return f.Setup() }),
			"ProcessElement": dofn.F5x1(f.ProcessElement, func(ctx, k, cands, emit, drop any) any {
				return f.ProcessElement(ctx.(context.Context), k, cands.(func(*candidate) bool), emit.(rowEmit), drop.(rowEmit))
			}),
		}
	})
	dofn.Register(&keyCandidatesFn{}, func(fn any) dofn.Methods {
		f := fn.(*keyCandidatesFn)
		m := candidateKeyingMethods(f)
		m["ProcessElement"] = dofn.F6x1(f.ProcessElement, func(ctx, ts, row, emit, dead, drop any) any {
			return f.ProcessElement(ctx.(context.Context), ts.(beam.EventTime), row, emit.(candEmit), dead.(deadEmit), drop.(dropEmit))
		})
		return m
	})
	dofn.Register(&windowKeyFn{}, func(fn any) dofn.Methods {
		f := fn.(*windowKeyFn)
		m := candidateKeyingMethods(&f.keyCandidatesFn)
		m["ProcessElement"] = dofn.F7x1(f.ProcessElement, func(ctx, w, ts, row, emit, dead, drop any) any {
			return f.ProcessElement(ctx.(context.Context), w.(beam.Window), ts.(beam.EventTime), row, emit.(candEmit), dead.(deadEmit), drop.(dropEmit))
		})
		return m
	})
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
	beam.RegisterType(reflect.TypeFor[candidate]())
	beam.RegisterCoder(reflect.TypeFor[candidate](), encodeCandidate, decodeCandidate)
}

// keyingMethods are the callers of keyRowsFn's and foldRowsFn's methods
// (finish is nil for keyRowsFn, which has no FinishBundle).
func keyingMethods(setup func() error, start func(context.Context, keyedEmit, deadEmit, dropEmit),
	process func(context.Context, beam.EventTime, beam.T, keyedEmit, deadEmit, dropEmit),
	finish func(context.Context, keyedEmit, deadEmit, dropEmit)) dofn.Methods {
	m := dofn.Methods{
		"Setup": dofn.F0x1(setup, func() any { return setup() }),
		"StartBundle": dofn.F4x0(start, func(ctx, emit, dead, drop any) {
			start(ctx.(context.Context), emit.(keyedEmit), dead.(deadEmit), drop.(dropEmit))
		}),
		"ProcessElement": dofn.F6x0(process, func(ctx, ts, row, emit, dead, drop any) {
			process(ctx.(context.Context), ts.(beam.EventTime), row, emit.(keyedEmit), dead.(deadEmit), drop.(dropEmit))
		}),
	}
	if finish != nil {
		m["FinishBundle"] = dofn.F4x0(finish, func(ctx, emit, dead, drop any) {
			finish(ctx.(context.Context), emit.(keyedEmit), dead.(deadEmit), drop.(dropEmit))
		})
	}
	return m
}

// candidateKeyingMethods are the callers of keyCandidatesFn's methods but
// ProcessElement.
func candidateKeyingMethods(f *keyCandidatesFn) dofn.Methods {
	return dofn.Methods{
		"Setup": dofn.F0x1(f.Setup, func() any { return f.Setup() }),
		"StartBundle": dofn.F4x0(f.StartBundle, func(ctx, emit, dead, drop any) {
			f.StartBundle(ctx.(context.Context), emit.(candEmit), dead.(deadEmit), drop.(dropEmit))
		}),
		"FinishBundle": dofn.F4x1(f.FinishBundle, func(ctx, emit, dead, drop any) any {
			return f.FinishBundle(ctx.(context.Context), emit.(candEmit), dead.(deadEmit), drop.(dropEmit))
		}),
	}
}

// untimedMethods are the callers of a stateful DoFn without timers.
func untimedMethods(setup func() error, u *untimed) dofn.Methods {
	return dofn.Methods{
		"Setup": dofn.F0x1(setup, func() any { return setup() }),
		"StartBundle": dofn.F3x0(u.StartBundle, func(ctx, emit, drop any) {
			u.StartBundle(ctx.(context.Context), emit.(rowEmit), drop.(rowEmit))
		}),
		"ProcessElement": dofn.F9x1(u.ProcessElement, func(ctx, pn, w, ts, sp, key, row, emit, drop any) any {
			return u.ProcessElement(ctx.(context.Context), pn.(typex.PaneInfo), w.(beam.Window), ts.(beam.EventTime), sp.(state.Provider), key, row, emit.(rowEmit), drop.(rowEmit))
		}),
		"FinishBundle": dofn.F3x1(u.FinishBundle, func(ctx, emit, drop any) any {
			return u.FinishBundle(ctx.(context.Context), emit.(rowEmit), drop.(rowEmit))
		}),
	}
}

// timedMethods are the callers of a stateful DoFn with a timer family.
func timedMethods(setup func() error, start func(context.Context, rowEmit, rowEmit),
	process func(context.Context, beam.Window, beam.EventTime, state.Provider, timers.Provider, beam.T, beam.V, rowEmit, rowEmit) error,
	onTimer func(context.Context, beam.Window, beam.EventTime, state.Provider, timers.Provider, beam.T, timers.Context, rowEmit, rowEmit) error,
	finish func(context.Context, rowEmit, rowEmit) error) dofn.Methods {
	return dofn.Methods{
		"Setup": dofn.F0x1(setup, func() any { return setup() }),
		"StartBundle": dofn.F3x0(start, func(ctx, emit, drop any) {
			start(ctx.(context.Context), emit.(rowEmit), drop.(rowEmit))
		}),
		"ProcessElement": dofn.F9x1(process, func(ctx, w, ts, sp, tp, key, row, emit, drop any) any {
			return process(ctx.(context.Context), w.(beam.Window), ts.(beam.EventTime), sp.(state.Provider), tp.(timers.Provider), key, row, emit.(rowEmit), drop.(rowEmit))
		}),
		"OnTimer": dofn.F9x1(onTimer, func(ctx, w, ts, sp, tp, key, timer, emit, drop any) any {
			return onTimer(ctx.(context.Context), w.(beam.Window), ts.(beam.EventTime), sp.(state.Provider), tp.(timers.Provider), key, timer.(timers.Context), emit.(rowEmit), drop.(rowEmit))
		}),
		"FinishBundle": dofn.F3x1(finish, func(ctx, emit, drop any) any {
			return finish(ctx.(context.Context), emit.(rowEmit), drop.(rowEmit))
		}),
	}
}

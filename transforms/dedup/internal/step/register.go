package step

import (
	"context"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/timers"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/typex"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beamdedup/beamdedup/transforms/internal/dofn"
)

// The DoFns are registered through package dofn, each method once, rather
// than with register.DoFnNxM, whose wrappers for every type-argument list
// doubled the size of a binary that imports dedup (docs/runners.md has the
// measurements). Each runtime lists the callers of its methods once
// (callers); the DoFn types that embed it (package dedup's) share them.
// Emitters and the iterator keep Beam's register: they instantiate little.

func init() {
	register.Emitter3[beam.EventTime, []byte, beam.T]()
	register.Emitter2[beam.EventTime, beam.T]()
	register.Emitter3[beam.EventTime, beam.U, beam.V]()
	register.Emitter3[beam.EventTime, beam.T, beam.V]()
	register.Emitter3[beam.EventTime, beam.T, candidate]()
	register.Emitter3[beam.EventTime, []byte, candidate]()
	register.Iter1[candidate]()
	register.Emitter3[beam.EventTime, uint32, []byte]()
	register.Iter1[[]byte]()
	register.Emitter3[beam.EventTime, []byte, []byte]()
}

// embedded is a DoFn runtime of this package, embedded in a DoFn type.
type embedded interface {
	// callers are the callers of its methods but Setup, for one instance.
	callers() dofn.Methods
}

// Register registers DoFn types that embed a runtime of this package (a
// pointer to each): by name, so that workers decode them, with the callers
// of the runtime's methods and of the type's own Setup.
func Register(fns ...any) {
	for _, fn := range fns {
		dofn.Register(fn, func(fn any) dofn.Methods {
			m := fn.(embedded).callers()
			setup := fn.(interface{ Setup() error }).Setup
			m["Setup"] = dofn.F0x1(setup, func() any { return setup() })
			return m
		})
	}
}

func (u *Untimed) callers() dofn.Methods {
	return dofn.Methods{
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

func (t *Timed) callers() dofn.Methods {
	return dofn.Methods{
		"StartBundle": dofn.F3x0(t.StartBundle, func(ctx, emit, drop any) {
			t.StartBundle(ctx.(context.Context), emit.(rowEmit), drop.(rowEmit))
		}),
		"ProcessElement": dofn.F9x1(t.ProcessElement, func(ctx, w, ts, sp, tp, key, row, emit, drop any) any {
			return t.ProcessElement(ctx.(context.Context), w.(beam.Window), ts.(beam.EventTime), sp.(state.Provider), tp.(timers.Provider), key, row, emit.(rowEmit), drop.(rowEmit))
		}),
		"OnTimer": dofn.F9x1(t.OnTimer, func(ctx, w, ts, sp, tp, key, timer, emit, drop any) any {
			return t.OnTimer(ctx.(context.Context), w.(beam.Window), ts.(beam.EventTime), sp.(state.Provider), tp.(timers.Provider), key, timer.(timers.Context), emit.(rowEmit), drop.(rowEmit))
		}),
		"FinishBundle": dofn.F3x1(t.FinishBundle, func(ctx, emit, drop any) any {
			return t.FinishBundle(ctx.(context.Context), emit.(rowEmit), drop.(rowEmit))
		}),
	}
}

// keyingCallers are the callers of KeyRows' and FoldRows' methods but
// Setup (finish is nil for KeyRows, which has no FinishBundle).
func keyingCallers(start func(context.Context, keyedEmit, deadEmit, dropEmit),
	process func(context.Context, beam.EventTime, beam.T, keyedEmit, deadEmit, dropEmit),
	finish func(context.Context, keyedEmit, deadEmit, dropEmit)) dofn.Methods {
	m := dofn.Methods{
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

func (f *KeyRows) callers() dofn.Methods { return keyingCallers(f.StartBundle, f.ProcessElement, nil) }

func (f *FoldRows) callers() dofn.Methods {
	return keyingCallers(f.StartBundle, f.ProcessElement, f.FinishBundle)
}

func (f *KeyPairs) callers() dofn.Methods {
	return dofn.Methods{
		"ProcessElement": dofn.F6x0(f.ProcessElement, func(ctx, ts, k, v, emit, dead any) {
			f.ProcessElement(ctx.(context.Context), ts.(beam.EventTime), k, v, emit.(func(beam.EventTime, beam.U, beam.V)), dead.(deadEmit))
		}),
	}
}

func (f *EncodeKeys) callers() dofn.Methods {
	return dofn.Methods{
		"ProcessElement": dofn.F4x1(f.ProcessElement, func(ts, k, v, emit any) any {
			return f.ProcessElement(ts.(beam.EventTime), k, v, emit.(func(beam.EventTime, []byte, beam.V)))
		}),
	}
}

func (f *DecodeKeys) callers() dofn.Methods {
	return dofn.Methods{
		"ProcessElement": dofn.F4x1(f.ProcessElement, func(ts, k, v, emit any) any {
			return f.ProcessElement(ts.(beam.EventTime), k.([]byte), v, emit.(func(beam.EventTime, beam.U, beam.V)))
		}),
	}
}

func (f *ToCandidate) callers() dofn.Methods {
	return dofn.Methods{
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
}

func (f *FromCandidate) callers() dofn.Methods {
	return dofn.Methods{
		"ProcessElement": dofn.F4x1(f.ProcessElement, func(ctx, k, m, emit any) any {
			return f.ProcessElement(ctx.(context.Context), k, m.(candidate), emit.(rowEmit))
		}),
	}
}

func (f *MergeGroup) callers() dofn.Methods {
	return dofn.Methods{
		"ProcessElement": dofn.F5x1(f.ProcessElement, func(ctx, k, cands, emit, drop any) any {
			return f.ProcessElement(ctx.(context.Context), k, cands.(func(*candidate) bool), emit.(rowEmit), drop.(rowEmit))
		}),
	}
}

func (f *Bucket) callers() dofn.Methods {
	return dofn.Methods{
		"StartBundle": dofn.F1x0(f.StartBundle, func(emit any) { f.StartBundle(emit.(batchEmit)) }),
		"ProcessElement": dofn.F4x0(f.ProcessElement, func(ts, k, c, emit any) {
			f.ProcessElement(ts.(beam.EventTime), k.([]byte), c.(candidate), emit.(batchEmit))
		}),
		"FinishBundle": dofn.F1x0(f.FinishBundle, func(emit any) { f.FinishBundle(emit.(batchEmit)) }),
	}
}

func (f *MergeBucket) callers() dofn.Methods {
	return dofn.Methods{
		"ProcessElement": dofn.F5x1(f.ProcessElement, func(ctx, k, batches, emit, drop any) any {
			return f.ProcessElement(ctx.(context.Context), k.(uint32), batches.(func(*[]byte) bool), emit.(rowEmit), drop.(rowEmit))
		}),
	}
}

func (u *BucketsUntimed) callers() dofn.Methods {
	return dofn.Methods{
		"StartBundle": dofn.F3x0(u.StartBundle, func(ctx, emit, drop any) {
			u.StartBundle(ctx.(context.Context), emit.(rowEmit), drop.(rowEmit))
		}),
		"ProcessElement": dofn.F6x1(u.ProcessElement, func(ctx, sp, key, rows, emit, drop any) any {
			return u.ProcessElement(ctx.(context.Context), sp.(state.Provider), key.([]byte), rows.([]byte), emit.(rowEmit), drop.(rowEmit))
		}),
		"FinishBundle": dofn.F3x1(u.FinishBundle, func(ctx, emit, drop any) any {
			return u.FinishBundle(ctx.(context.Context), emit.(rowEmit), drop.(rowEmit))
		}),
	}
}

func (t *BucketsTimed) callers() dofn.Methods {
	return dofn.Methods{
		"StartBundle": dofn.F3x0(t.StartBundle, func(ctx, emit, drop any) {
			t.StartBundle(ctx.(context.Context), emit.(rowEmit), drop.(rowEmit))
		}),
		"ProcessElement": dofn.F7x1(t.ProcessElement, func(ctx, sp, tp, key, rows, emit, drop any) any {
			return t.ProcessElement(ctx.(context.Context), sp.(state.Provider), tp.(timers.Provider), key.([]byte), rows.([]byte), emit.(rowEmit), drop.(rowEmit))
		}),
		"OnTimer": dofn.F8x1(t.OnTimer, func(ctx, ts, sp, tp, key, timer, emit, drop any) any {
			return t.OnTimer(ctx.(context.Context), ts.(beam.EventTime), sp.(state.Provider), tp.(timers.Provider), key.([]byte), timer.(timers.Context), emit.(rowEmit), drop.(rowEmit))
		}),
		"FinishBundle": dofn.F3x1(t.FinishBundle, func(ctx, emit, drop any) any {
			return t.FinishBundle(ctx.(context.Context), emit.(rowEmit), drop.(rowEmit))
		}),
	}
}

func (f *BucketRows) callers() dofn.Methods {
	return dofn.Methods{
		"StartBundle": dofn.F1x0(f.StartBundle, func(emit any) { f.StartBundle(emit.(bucketBatchEmit)) }),
		"ProcessElement": dofn.F4x1(f.ProcessElement, func(ts, k, row, emit any) any {
			return f.ProcessElement(ts.(beam.EventTime), k.([]byte), row, emit.(bucketBatchEmit))
		}),
		"FinishBundle": dofn.F1x0(f.FinishBundle, func(emit any) { f.FinishBundle(emit.(bucketBatchEmit)) }),
	}
}

// candidateKeyingCallers are the callers of KeyCandidates' StartBundle and
// FinishBundle, which WindowKey shares.
func candidateKeyingCallers(f *KeyCandidates) dofn.Methods {
	return dofn.Methods{
		"StartBundle": dofn.F4x0(f.StartBundle, func(ctx, emit, dead, drop any) {
			f.StartBundle(ctx.(context.Context), emit.(candEmit), dead.(deadEmit), drop.(dropEmit))
		}),
		"FinishBundle": dofn.F4x1(f.FinishBundle, func(ctx, emit, dead, drop any) any {
			return f.FinishBundle(ctx.(context.Context), emit.(candEmit), dead.(deadEmit), drop.(dropEmit))
		}),
	}
}

func (f *KeyCandidates) callers() dofn.Methods {
	m := candidateKeyingCallers(f)
	m["ProcessElement"] = dofn.F6x1(f.ProcessElement, func(ctx, ts, row, emit, dead, drop any) any {
		return f.ProcessElement(ctx.(context.Context), ts.(beam.EventTime), row, emit.(candEmit), dead.(deadEmit), drop.(dropEmit))
	})
	return m
}

func (f *WindowKey) callers() dofn.Methods {
	m := candidateKeyingCallers(&f.KeyCandidates)
	m["ProcessElement"] = dofn.F7x1(f.ProcessElement, func(ctx, w, ts, row, emit, dead, drop any) any {
		return f.ProcessElement(ctx.(context.Context), w.(beam.Window), ts.(beam.EventTime), row, emit.(candEmit), dead.(deadEmit), drop.(dropEmit))
	})
	return m
}

package kafkaio

import (
	"context"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/timers"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beamdedup/beamdedup/internal/unbounded"
	"github.com/beamdedup/beamdedup/transforms/internal/dofn"
)

// The restriction methods, called once per partition or bundle, go by
// reflection.
func init() {
	dofn.Register(&listFn{}, func(fn any) dofn.Methods {
		f := fn.(*listFn)
		return dofn.Methods{
			"Setup": dofn.F0x1(f.Setup, func() any { return f.Setup() }),
			"ProcessElement": dofn.F3x1(f.ProcessElement, func(ctx, imp, emit any) any {
				return f.ProcessElement(ctx.(context.Context), imp.([]byte), emit.(func(partition)))
			}),
		}
	})
	dofn.Register(&watchFn{}, func(fn any) dofn.Methods {
		f := fn.(*watchFn)
		return dofn.Methods{
			"Setup": dofn.F0x1(f.Setup, func() any { return f.Setup() }),
			"ProcessElement": dofn.F5x2(f.ProcessElement, func(ctx, we, rt, imp, emit any) (any, any) {
				c, err := f.ProcessElement(ctx.(context.Context), we.(*unbounded.Watermark), rt.(*sdf.LockRTracker), imp.([]byte), emit.(func(beam.EventTime, partition)))
				return c, err
			}),
		}
	})
	dofn.Register(&readFn{}, func(fn any) dofn.Methods {
		f := fn.(*readFn)
		return dofn.Methods{
			"Setup": dofn.F0x1(f.Setup, func() any { return f.Setup() }),
			"ProcessElement": dofn.F5x2(f.ProcessElement, func(ctx, we, rt, p, emit any) (any, any) {
				c, err := f.ProcessElement(ctx.(context.Context), we.(*unbounded.Watermark), rt.(*sdf.LockRTracker), p.(partition), emit.(func(beam.EventTime, Record)))
				return c, err
			}),
		}
	})
	dofn.Register(&writeFn{}, func(fn any) dofn.Methods {
		f := fn.(*writeFn)
		return dofn.Methods{
			"Setup":    dofn.F0x1(f.Setup, func() any { return f.Setup() }),
			"Teardown": dofn.F0x0(f.Teardown, f.Teardown),
			"StartBundle": dofn.F2x0(f.StartBundle, func(ctx, emit any) {
				f.StartBundle(ctx.(context.Context), emit.(func(Record)))
			}),
			"ProcessElement": dofn.F3x0(f.ProcessElement, func(ctx, r, emit any) {
				f.ProcessElement(ctx.(context.Context), r.(Record), emit.(func(Record)))
			}),
			"FinishBundle": dofn.F2x1(f.FinishBundle, func(ctx, emit any) any {
				return f.FinishBundle(ctx.(context.Context), emit.(func(Record)))
			}),
		}
	})
	dofn.Register(&txnWriteFn{}, func(fn any) dofn.Methods {
		f := fn.(*txnWriteFn)
		return dofn.Methods{
			"Setup":    dofn.F1x1(f.Setup, func(ctx any) any { return f.Setup(ctx.(context.Context)) }),
			"Teardown": dofn.F0x0(f.Teardown, f.Teardown),
			"StartBundle": dofn.F2x0(f.StartBundle, func(ctx, emit any) {
				f.StartBundle(ctx.(context.Context), emit.(func(Record)))
			}),
			"ProcessElement": dofn.F6x1(f.ProcessElement, func(ctx, sp, tp, shard, r, emit any) any {
				return f.ProcessElement(ctx.(context.Context), sp.(state.Provider), tp.(timers.Provider), shard.(int64), r.(Record), emit.(func(Record)))
			}),
			"OnTimer": dofn.F6x1(f.OnTimer, func(ctx, sp, tp, shard, timer, emit any) any {
				return f.OnTimer(ctx.(context.Context), sp.(state.Provider), tp.(timers.Provider), shard.(int64), timer.(timers.Context), emit.(func(Record)))
			}),
			"FinishBundle": dofn.F2x1(f.FinishBundle, func(ctx, emit any) any {
				return f.FinishBundle(ctx.(context.Context), emit.(func(Record)))
			}),
		}
	})
	register.DoFn1x2[Record, int64, Record](&shardFn{})
	dofn.Register(&droppedFn{}, func(fn any) dofn.Methods {
		f := fn.(*droppedFn)
		return dofn.Methods{
			"ProcessElement": dofn.F2x1(f.ProcessElement, func(ctx, r any) any {
				return f.ProcessElement(ctx.(context.Context), r.(Record))
			}),
			"FinishBundle": dofn.F1x0(f.FinishBundle, func(ctx any) { f.FinishBundle(ctx.(context.Context)) }),
		}
	})
	dofn.Register(&markFn{}, func(fn any) dofn.Methods {
		f := fn.(*markFn)
		return dofn.Methods{
			"StartBundle": dofn.F2x0(f.StartBundle, func(ctx, emit any) {
				f.StartBundle(ctx.(context.Context), emit.(func(string, marks)))
			}),
			"ProcessElement": dofn.F3x0(f.ProcessElement, func(ctx, r, emit any) {
				f.ProcessElement(ctx.(context.Context), r.(Record), emit.(func(string, marks)))
			}),
			"FinishBundle": dofn.F2x0(f.FinishBundle, func(ctx, emit any) {
				f.FinishBundle(ctx.(context.Context), emit.(func(string, marks)))
			}),
		}
	})
	dofn.Register(&ledgerFn{}, func(fn any) dofn.Methods {
		f := fn.(*ledgerFn)
		return dofn.Methods{
			"Setup": dofn.F0x1(f.Setup, func() any { return f.Setup() }),
			"ProcessElement": dofn.F5x1(f.ProcessElement, func(ctx, sp, tp, key, m any) any {
				return f.ProcessElement(ctx.(context.Context), sp.(state.Provider), tp.(timers.Provider), key.(string), m.(marks))
			}),
			"OnTimer": dofn.F5x1(f.OnTimer, func(ctx, sp, tp, key, timer any) any {
				return f.OnTimer(ctx.(context.Context), sp.(state.Provider), tp.(timers.Provider), key.(string), timer.(timers.Context))
			}),
		}
	})
	register.Emitter1[partition]()
	register.Emitter2[beam.EventTime, partition]()
	register.Emitter1[Record]()
	register.Emitter2[beam.EventTime, Record]()
	register.Emitter2[string, marks]()
}

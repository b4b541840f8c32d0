// Package dofn registers the transforms' DoFns with Beam without Beam's
// generic register package, whose register.DoFnNxM costs about 3 MB of a
// stripped binary per list of type arguments: each DoFn lists its methods
// once, as closures over a non-generic caller of their arity, which Beam
// calls by its CallNxM method (core/runtime/exec/fn_arity.go).
//
// It relies on reflectx.RegisterStructWrapper and the shape of
// reflectx.Func, documented only in Beam's code: each package's tests
// Verify their DoFns.
package dofn

import (
	"fmt"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/util/reflectx"
)

// Methods maps a DoFn instance's method names to their callers.
type Methods = map[string]reflectx.Func

// Register registers the DoFn type of fn (a pointer to a struct) and
// methods, which makes the callers of an instance's methods.
func Register(fn any, methods func(fn any) Methods) {
	t := reflect.TypeOf(fn).Elem()
	beam.RegisterType(t)
	reflectx.RegisterStructWrapper(t, methods)
}

type caller struct {
	name string
	t    reflect.Type
}

func newCaller(method any) caller {
	return caller{name: reflectx.FunctionName(method), t: reflect.TypeOf(method)}
}

func (c caller) Name() string       { return c.name }
func (c caller) Type() reflect.Type { return c.t }

// Callers by arity: FNxM's method takes N arguments and returns M
// results; method is the bound method (for its type), call calls it.

type f0x0 struct {
	caller
	fn func()
}

// F0x0 is a caller of a method with no argument and no result.
func F0x0(method any, call func()) reflectx.Func { return &f0x0{newCaller(method), call} }
func (f *f0x0) Call(a []any) []any               { f.fn(); return nil }
func (f *f0x0) Call0x0()                         { f.fn() }

type f1x0 struct {
	caller
	fn func(a0 any)
}

// F1x0 is a caller of a method with one argument and no result.
func F1x0(method any, call func(a0 any)) reflectx.Func { return &f1x0{newCaller(method), call} }
func (f *f1x0) Call(a []any) []any                     { f.fn(a[0]); return nil }
func (f *f1x0) Call1x0(a0 any)                         { f.fn(a0) }

type f1x1 struct {
	caller
	fn func(a0 any) any
}

// F1x1 is a caller of a method with one argument and one result.
func F1x1(method any, call func(a0 any) any) reflectx.Func { return &f1x1{newCaller(method), call} }
func (f *f1x1) Call(a []any) []any                         { return []any{f.fn(a[0])} }
func (f *f1x1) Call1x1(a0 any) any                         { return f.fn(a0) }

type f3x1 struct {
	caller
	fn func(a0, a1, a2 any) any
}

// F3x1 is a caller of a method with three arguments and one result.
func F3x1(method any, call func(a0, a1, a2 any) any) reflectx.Func {
	return &f3x1{newCaller(method), call}
}
func (f *f3x1) Call(a []any) []any         { return []any{f.fn(a[0], a[1], a[2])} }
func (f *f3x1) Call3x1(a0, a1, a2 any) any { return f.fn(a0, a1, a2) }

type f5x0 struct {
	caller
	fn func(a0, a1, a2, a3, a4 any)
}

// F5x0 is a caller of a method with five arguments and no result.
func F5x0(method any, call func(a0, a1, a2, a3, a4 any)) reflectx.Func {
	return &f5x0{newCaller(method), call}
}
func (f *f5x0) Call(a []any) []any             { f.fn(a[0], a[1], a[2], a[3], a[4]); return nil }
func (f *f5x0) Call5x0(a0, a1, a2, a3, a4 any) { f.fn(a0, a1, a2, a3, a4) }

type f0x1 struct {
	caller
	fn func() any
}

// F0x1 is a caller of a method with no argument and one result.
func F0x1(method any, call func() any) reflectx.Func { return &f0x1{newCaller(method), call} }
func (f *f0x1) Call(a []any) []any                   { return []any{f.fn()} }
func (f *f0x1) Call0x1() any                         { return f.fn() }

type f2x0 struct {
	caller
	fn func(a0, a1 any)
}

// F2x0 is a caller of a method with two arguments and no result.
func F2x0(method any, call func(a0, a1 any)) reflectx.Func { return &f2x0{newCaller(method), call} }
func (f *f2x0) Call(a []any) []any                         { f.fn(a[0], a[1]); return nil }
func (f *f2x0) Call2x0(a0, a1 any)                         { f.fn(a0, a1) }

type f2x1 struct {
	caller
	fn func(a0, a1 any) any
}

// F2x1 is a caller of a method with two arguments and one result.
func F2x1(method any, call func(a0, a1 any) any) reflectx.Func { return &f2x1{newCaller(method), call} }
func (f *f2x1) Call(a []any) []any                             { return []any{f.fn(a[0], a[1])} }
func (f *f2x1) Call2x1(a0, a1 any) any                         { return f.fn(a0, a1) }

type f3x0 struct {
	caller
	fn func(a0, a1, a2 any)
}

// F3x0 is a caller of a method with three arguments and no result.
func F3x0(method any, call func(a0, a1, a2 any)) reflectx.Func { return &f3x0{newCaller(method), call} }
func (f *f3x0) Call(a []any) []any                             { f.fn(a[0], a[1], a[2]); return nil }
func (f *f3x0) Call3x0(a0, a1, a2 any)                         { f.fn(a0, a1, a2) }

type f4x0 struct {
	caller
	fn func(a0, a1, a2, a3 any)
}

// F4x0 is a caller of a method with four arguments and no result.
func F4x0(method any, call func(a0, a1, a2, a3 any)) reflectx.Func {
	return &f4x0{newCaller(method), call}
}
func (f *f4x0) Call(a []any) []any         { f.fn(a[0], a[1], a[2], a[3]); return nil }
func (f *f4x0) Call4x0(a0, a1, a2, a3 any) { f.fn(a0, a1, a2, a3) }

type f4x1 struct {
	caller
	fn func(a0, a1, a2, a3 any) any
}

// F4x1 is a caller of a method with four arguments and one result.
func F4x1(method any, call func(a0, a1, a2, a3 any) any) reflectx.Func {
	return &f4x1{newCaller(method), call}
}
func (f *f4x1) Call(a []any) []any             { return []any{f.fn(a[0], a[1], a[2], a[3])} }
func (f *f4x1) Call4x1(a0, a1, a2, a3 any) any { return f.fn(a0, a1, a2, a3) }

type f5x1 struct {
	caller
	fn func(a0, a1, a2, a3, a4 any) any
}

// F5x1 is a caller of a method with five arguments and one result.
func F5x1(method any, call func(a0, a1, a2, a3, a4 any) any) reflectx.Func {
	return &f5x1{newCaller(method), call}
}
func (f *f5x1) Call(a []any) []any                 { return []any{f.fn(a[0], a[1], a[2], a[3], a[4])} }
func (f *f5x1) Call5x1(a0, a1, a2, a3, a4 any) any { return f.fn(a0, a1, a2, a3, a4) }

type f5x2 struct {
	caller
	fn func(a0, a1, a2, a3, a4 any) (any, any)
}

// F5x2 is a caller of a method with five arguments and two results (a
// splittable DoFn's ProcessElement: its continuation and an error).
func F5x2(method any, call func(a0, a1, a2, a3, a4 any) (any, any)) reflectx.Func {
	return &f5x2{newCaller(method), call}
}
func (f *f5x2) Call(a []any) []any {
	r0, r1 := f.fn(a[0], a[1], a[2], a[3], a[4])
	return []any{r0, r1}
}
func (f *f5x2) Call5x2(a0, a1, a2, a3, a4 any) (any, any) { return f.fn(a0, a1, a2, a3, a4) }

type f6x0 struct {
	caller
	fn func(a0, a1, a2, a3, a4, a5 any)
}

// F6x0 is a caller of a method with six arguments and no result.
func F6x0(method any, call func(a0, a1, a2, a3, a4, a5 any)) reflectx.Func {
	return &f6x0{newCaller(method), call}
}
func (f *f6x0) Call(a []any) []any                 { f.fn(a[0], a[1], a[2], a[3], a[4], a[5]); return nil }
func (f *f6x0) Call6x0(a0, a1, a2, a3, a4, a5 any) { f.fn(a0, a1, a2, a3, a4, a5) }

type f6x1 struct {
	caller
	fn func(a0, a1, a2, a3, a4, a5 any) any
}

// F6x1 is a caller of a method with six arguments and one result.
func F6x1(method any, call func(a0, a1, a2, a3, a4, a5 any) any) reflectx.Func {
	return &f6x1{newCaller(method), call}
}
func (f *f6x1) Call(a []any) []any                     { return []any{f.fn(a[0], a[1], a[2], a[3], a[4], a[5])} }
func (f *f6x1) Call6x1(a0, a1, a2, a3, a4, a5 any) any { return f.fn(a0, a1, a2, a3, a4, a5) }

type f7x1 struct {
	caller
	fn func(a0, a1, a2, a3, a4, a5, a6 any) any
}

// F7x1 is a caller of a method with seven arguments and one result.
func F7x1(method any, call func(a0, a1, a2, a3, a4, a5, a6 any) any) reflectx.Func {
	return &f7x1{newCaller(method), call}
}
func (f *f7x1) Call(a []any) []any {
	return []any{f.fn(a[0], a[1], a[2], a[3], a[4], a[5], a[6])}
}
func (f *f7x1) Call7x1(a0, a1, a2, a3, a4, a5, a6 any) any { return f.fn(a0, a1, a2, a3, a4, a5, a6) }

type f8x1 struct {
	caller
	fn func(a0, a1, a2, a3, a4, a5, a6, a7 any) any
}

// F8x1 is a caller of a method with eight arguments and one result.
func F8x1(method any, call func(a0, a1, a2, a3, a4, a5, a6, a7 any) any) reflectx.Func {
	return &f8x1{newCaller(method), call}
}
func (f *f8x1) Call(a []any) []any {
	return []any{f.fn(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7])}
}
func (f *f8x1) Call8x1(a0, a1, a2, a3, a4, a5, a6, a7 any) any {
	return f.fn(a0, a1, a2, a3, a4, a5, a6, a7)
}

// f9x1 has no CallNxM (Beam's fast paths stop at eight arguments): its
// Call reuses its own result slice, as one goroutine at a time calls it.
type f9x1 struct {
	caller
	fn  func(a0, a1, a2, a3, a4, a5, a6, a7, a8 any) any
	out [1]any
}

// F9x1 is a caller of a method with nine arguments and one result.
func F9x1(method any, call func(a0, a1, a2, a3, a4, a5, a6, a7, a8 any) any) reflectx.Func {
	return &f9x1{caller: newCaller(method), fn: call}
}
func (f *f9x1) Call(a []any) []any {
	f.out[0] = f.fn(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8])
	return f.out[:]
}

var lifecycle = []string{"Setup", "StartBundle", "ProcessElement", "FinishBundle", "Teardown", "OnTimer"}

// Verify reports how the registration of fn (a pointer to a registered
// DoFn) falls short: a lifecycle method without a caller or with a caller
// of another type or without its fast path, or a DoFn Beam rejects.
func Verify(fn any) error {
	methods, ok := reflectx.WrapMethods(fn)
	if !ok {
		return fmt.Errorf("%T: no struct wrapper registered", fn)
	}
	v := reflect.ValueOf(fn)
	for _, name := range lifecycle {
		m := v.MethodByName(name)
		c, wrapped := methods[name]
		switch {
		case !m.IsValid() && wrapped:
			return fmt.Errorf("%T.%s: a caller of a method the type lacks", fn, name)
		case !m.IsValid():
			continue
		case !wrapped:
			return fmt.Errorf("%T.%s has no caller: Beam would call it by reflection", fn, name)
		case c.Type() != m.Type():
			return fmt.Errorf("%T.%s: the caller has type %v, the method %v", fn, name, c.Type(), m.Type())
		}
		in, out := m.Type().NumIn(), m.Type().NumOut()
		if in <= 8 && !reflect.ValueOf(c).MethodByName(fmt.Sprintf("Call%dx%d", in, out)).IsValid() {
			return fmt.Errorf("%T.%s: the caller has no Call%dx%d, Beam's fast path", fn, name, in, out)
		}
	}
	if _, err := graph.NewFn(fn); err != nil {
		return fmt.Errorf("%T: Beam rejects it: %w", fn, err)
	}
	return nil
}

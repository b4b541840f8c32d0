// Package panetest makes input whose rows reach a step in one bundle and in
// two panes, for tests of the order in which a step emits a key's outputs:
// rows of a GroupByKey's pane (ON_TIME) beside rows that a FinishBundle
// emitted (the no-firing pane), as a pipeline that flattens or fuses such
// steps hands them on.
package panetest

import (
	"fmt"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
)

// Version is a key's version of a row: A, then B.
type Version struct {
	Op  string `beam:"op"`
	Key string `beam:"key"`
	Ver string `beam:"ver"`
}

// First and Last are the versions each key gets, in the order a step
// decides them in (A's timestamp is the earlier).
const (
	First = "A"
	Last  = "B"
)

func init() {
	beam.RegisterType(reflect.TypeFor[Version]())
	register.DoFn4x0[beam.EventTime, string, func(*int) bool, func(beam.EventTime, string, Version)](&mixFn{})
	register.Emitter3[beam.EventTime, string, Version]()
	register.Iter1[int]()
	register.Function1x2(keyOf)
}

// Versions returns, for each of keys keys ("k000", ...), its two versions
// as KV<string, Version>, both +I: B at 2 s in a GroupByKey's pane, and A
// at 1 s, earlier in event time, so that Prism, which
// hands a key its rows in event-time order, gives the next stateful step A
// first; A comes from the FinishBundle of the step that emits B, in the
// no-firing pane. Prism runs both in one bundle of the next stage.
func Versions(s beam.Scope, keys int) beam.PCollection {
	s = s.Scope("panetest.Versions")
	in := make([]int, keys)
	for i := range in {
		in[i] = i
	}
	return beam.ParDo(s, &mixFn{}, beam.GroupByKey(s, beam.ParDo(s, keyOf, beam.CreateList(s, in))))
}

func keyOf(i int) (string, int) { return fmt.Sprintf("k%03d", i), i }

// mixFn emits each grouped key's B at once and its A from FinishBundle.
type mixFn struct {
	held []string
}

func (f *mixFn) StartBundle(_ func(beam.EventTime, string, Version)) { f.held = f.held[:0] }

func (f *mixFn) ProcessElement(_ beam.EventTime, key string, _ func(*int) bool, emit func(beam.EventTime, string, Version)) {
	emit(beam.EventTime(2000), key, Version{Op: "+I", Key: key, Ver: Last})
	f.held = append(f.held, key)
}

func (f *mixFn) FinishBundle(emit func(beam.EventTime, string, Version)) {
	for _, key := range f.held {
		emit(beam.EventTime(1000), key, Version{Op: "+I", Key: key, Ver: First})
	}
}

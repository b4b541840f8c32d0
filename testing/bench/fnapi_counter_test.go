package bench_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/stretchr/testify/assert"

	"github.com/beamdedup/beamdedup/testing/bench"
	"github.com/beamdedup/beamdedup/testing/prismtest"
)

// callsFn makes, per element, the SDK calls whose cost the dedup stores
// count (transforms/dedup/internal/step/state.go): a bag read and a blind append of a
// bool and of bytes, and a value state's read and write of bytes.
type callsFn struct {
	Bools state.Bag[bool]
	Bytes state.Bag[[]byte]
	Value state.Value[[]byte]
}

func (f *callsFn) ProcessElement(sp state.Provider, _ string, v int, emit func(int)) error {
	if _, _, err := f.Bools.Read(sp); err != nil {
		return err
	}
	if err := f.Bools.Add(sp, true); err != nil {
		return err
	}
	if err := f.Bytes.Add(sp, []byte("row")); err != nil {
		return err
	}
	if _, _, err := f.Value.Read(sp); err != nil {
		return err
	}
	if err := f.Value.Write(sp, []byte("row")); err != nil {
		return err
	}
	emit(v)
	return nil
}

func keyOf(v int) (string, int) { return fmt.Sprint(v), v }

func init() {
	register.DoFn4x1[state.Provider, string, int, func(int), error](&callsFn{})
	register.Function1x2(keyOf)
	register.Emitter1[int]()
}

// What each SDK call costs in Fn API requests, measured: a read is one get,
// a blind append of a bool one append, of bytes two (the length, then the
// bytes), and a value state's write of bytes a clear and two appends.
func TestEachSDKCallCostsTheRequestsTheStoresCount(t *testing.T) {
	const n = 20
	p, s := beam.NewPipelineWithRoot()
	keyed := beam.ParDo(s, keyOf, beam.CreateList(s, func() []int {
		var xs []int
		for i := range n {
			xs = append(xs, i)
		}
		return xs
	}()))
	beam.ParDo(s, &callsFn{Bools: state.MakeBagState[bool]("bools"), Bytes: state.MakeBagState[[]byte]("bytes"), Value: state.MakeValueState[[]byte]("value")}, keyed)
	bench.ResetStateRequests()
	prismtest.Run(t, p, 2*time.Minute)
	assert.Equal(t, bench.StateRequests{Gets: n, Appends: n}, bench.StateRequestsOf("bools"))
	assert.Equal(t, bench.StateRequests{Appends: 2 * n}, bench.StateRequestsOf("bytes"))
	assert.Equal(t, bench.StateRequests{Gets: n, Appends: 2 * n, Clears: n}, bench.StateRequestsOf("value"))
}

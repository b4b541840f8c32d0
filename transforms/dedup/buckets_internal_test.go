package dedup

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/transforms/dedup/internal/core"
	"github.com/beamdedup/beamdedup/transforms/dedup/internal/statecoder"
)

// State per bucket decides as a cell per key: on a random stream of
// bundles of 1 to 300 rows over 25 keys, with watermark and clock moves,
// through each of the restore test's modes and the DoFns they leave out,
// the step that keeps state in 1 or 7 buckets gives each key the output of
// the step that keeps a cell per key, in the same order; counts every row
// the same; and leaves each key the same state. (Across keys its output
// comes a bucket at a time.) It does so with its writes deferred to the
// bundle's end (its requests overlapped, finishing out of order) and
// without (each request waited for).
func TestStatePerBucket_EveryModeDecidesAsACellPerKey(t *testing.T) {
	for i, tc := range everyMode() {
		events := randomStream(tc, rand.New(rand.NewPCG(uint64(i), 11)))
		perKey := newRestoreDriver(t, tc, nil, true)
		perKey.req.Jitter = true
		perKey.run(events)
		require.NotEmpty(t, perKey.out)
		for _, n := range []int{1, 7} {
			for _, overlap := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%d buckets/overlapped_%v", tc.name, n, overlap), func(t *testing.T) {
					bt := tc
					bt.opts = append(slices.Clone(tc.opts), StateBuckets(n))
					d := newRestoreDriver(t, bt, nil, overlap)
					d.req.Jitter = true
					d.run(events)
					require.Equal(t, n, d.buckets)
					assert.Equal(t, byKey(perKey.out), byKey(d.out), "each key's output, in its order")
					assert.Equal(t, perKey.outcomes(), d.outcomes(), "every row counted the same")
					assert.Equal(t, perKey.states(), d.states(), "the state each key is left with")
					assert.Empty(t, d.req.Overlaps, "two requests of a bucket at once")
					assert.Zero(t, d.req.Late, "requests between bundles")
				})
			}
		}
	}
}

// outcomes are the counters of where the step's rows went, and of what its
// timers did: not of its requests, which the layouts make differently.
func (d *restoreDriver) outcomes() map[string]int64 {
	out := map[string]int64{}
	metrics.Extractor{SumInt64: func(l metrics.Labels, v int64) {
		if !strings.HasPrefix(l.Name(), "state_") && l.Name() != "timer_sets" {
			out[l.Name()] += v
		}
	}}.ExtractFrom(metrics.GetStore(d.ctx))
	return out
}

// states is each key's state as the step's cells hold it, decoded: a key's
// marks or versions, or its entry in its bucket's segments.
func (d *restoreDriver) states() map[string]core.State {
	out := map[string]core.State{}
	dec := func(b []byte) any {
		v, err := d.dec.Decode(bytes.NewReader(b))
		require.NoError(d.t, err)
		return v
	}
	for key, els := range d.cells {
		var st core.State
		var err error
		switch {
		case d.buckets > 0:
			var segs [][]byte
			for _, el := range els {
				segs = append(segs, dec(el).([]byte))
			}
			_, err = statecoder.FoldSegments(segs, d.buckets, func(e *statecoder.Entry) {
				if len(e.State) == 0 {
					delete(out, string(e.Key))
					return
				}
				var st core.State
				require.NoError(d.t, statecoder.Decode(e.State, &st))
				out[string(e.Key)] = st
			})
			require.NoError(d.t, err)
			continue
		case d.enc == nil:
			d.t.Fatal("no cell coder")
		case reflect.TypeOf(dec(els[0])) == reflect.TypeFor[int64]():
			var marks []int64
			for _, el := range els {
				marks = append(marks, dec(el).(int64))
			}
			st, err = statecoder.FoldMarks(marks)
		default:
			var versions [][]byte
			for _, el := range els {
				versions = append(versions, dec(el).([]byte))
			}
			st, err = statecoder.LastVersion(versions)
		}
		require.NoError(d.t, err)
		if st.Phase != core.None {
			out[key] = st
		}
	}
	return out
}

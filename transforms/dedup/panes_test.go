package dedup_test

import (
	"sync"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/testing/deduptest"
	"github.com/beamdedup/beamdedup/testing/panetest"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

func init() {
	register.Function2x0(logKVOutput)
	register.Function1x0(logOutput)
}

// outputOrder records, in this process (Prism runs in it), each key's
// output rows in the order the step emitted them.
var outputOrder struct {
	sync.Mutex
	rows map[string][]string
}

func logOutput(r panetest.Version) {
	outputOrder.Lock()
	defer outputOrder.Unlock()
	outputOrder.rows[r.Key] = append(outputOrder.rows[r.Key], r.Op+" "+r.Ver)
}

func logKVOutput(_ string, r panetest.Version) { logOutput(r) }

// A key's outputs leave the stateful step in the order they were decided
// in, when its rows reach one bundle in different panes (rows of a
// GroupByKey's pane with rows a FinishBundle emitted): a sink that keeps
// the last row it is sent ends on B for every key.
func TestKeepLast_AKeysOutputsLeaveInDecisionOrderWhenItsRowsComeInMixedPanes(t *testing.T) {
	const keys = 200
	// A cell per key: its step batches rows, and a row of another pane cuts
	// the batch short (per bucket, a bucket's rows come in one element).
	changelog := []dedup.Option{rowspec.PartitionBy("key"), rowspec.KindColumn("op"), dedup.MiniBatch(false), dedup.StateBuckets(0)}
	for _, tc := range []struct {
		name string
		kv   bool
		opts []dedup.Option
		want []string
	}{
		{"KV input, upserts", true, []dedup.Option{rowspec.Upsert()}, []string{"+I A", "+I B"}},
		{"struct rows, changelog", false, changelog, []string{"+I A", "-U A", "+U B"}},
		{"struct rows, changelog, requests waited for", false, append(changelog, deduptest.OverlapState(false)), []string{"+I A", "-U A", "+U B"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			outputOrder.Lock()
			outputOrder.rows = make(map[string][]string)
			outputOrder.Unlock()

			p, s := beam.NewPipelineWithRoot()
			versions := panetest.Versions(s, keys)
			opts := append([]dedup.Option{dedup.AsStream()}, tc.opts...)
			if tc.kv {
				beam.ParDo0(s, logKVOutput, dedup.KeepLast(s, versions, opts...).Rows)
			} else {
				beam.ParDo0(s, logOutput, dedup.KeepLast(s, beam.DropKey(s, versions), opts...).Rows)
			}
			runLast(t, p)

			outputOrder.Lock()
			defer outputOrder.Unlock()
			require.Len(t, outputOrder.rows, keys)
			wrong := 0
			for key, got := range outputOrder.rows {
				if !assert.Equal(t, tc.want, got, "key %s's outputs, in the order they left the step", key) {
					if wrong++; wrong == 3 {
						t.Fatal("more keys out of order")
					}
				}
			}
		})
	}
}

package orders_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/pipelines/jsonl"
	"github.com/beamdedup/beamdedup/pipelines/orders"
	"github.com/beamdedup/beamdedup/testing/pipelinetest"
	"github.com/beamdedup/beamdedup/testing/prismtest"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

func TestMain(m *testing.M) { prismtest.Main(m) } // splitting off: notes/beam-defects.md 9

func TestGenerateDuplicatesEveryOrderUnder100Exactly(t *testing.T) {
	for _, tc := range []struct {
		count int
		seed  uint64
	}{{1, 1}, {12, 3}, {500, 42}} {
		got := orders.Generate(tc.count, tc.seed)
		assert.Equal(t, got, orders.Generate(tc.count, tc.seed), "same seed, same orders")

		first := map[string]int{} // order_id -> position of the original
		originals := 0
		for i, o := range got {
			j, seen := first[o.OrderID]
			if !seen {
				first[o.OrderID] = i
				originals++
				assert.True(t, o.Price >= 10 && o.Price <= 500, "price %v", o.Price)
				assert.True(t, o.Quantity >= 100 && o.Quantity < 10000, "quantity %v", o.Quantity)
				continue
			}
			assert.Equal(t, got[j], o, "a duplicate is exact")
			assert.Less(t, o.Price, orders.DuplicateBelow)
		}
		assert.Equal(t, tc.count, originals)
		under := 0
		for id, i := range first {
			if got[i].Price < orders.DuplicateBelow {
				under++
				n := 0
				for _, o := range got {
					if o.OrderID == id {
						n++
					}
				}
				assert.Equal(t, 2, n, "order %s priced %v appears twice", id, got[i].Price)
			}
		}
		assert.Equal(t, tc.count+under, len(got))
	}
	assert.NotEqual(t, orders.Generate(20, 1), orders.Generate(20, 2), "another seed, other orders")
}

// Both expansions of KeepFirst must give the expected files: the batch one
// a file gets by default, and the stateful one an unbounded source gets.
func TestBuildMatchesExpectedFiles(t *testing.T) {
	for _, tc := range pipelinetest.Expansions {
		t.Run(tc.Name, func(t *testing.T) {
			pr := pipelinetest.RunTestdata(t, "orders", func(s beam.Scope, input, output string) error {
				_, err := orders.Build(s, orders.Config{Input: input, Output: output, Dedup: tc.Options})
				return err
			})
			c := dedup.ReadCounters(pr)
			assert.Equal(t, dedup.Counters{RowsIn: 14, Emitted: 12, DuplicatesDropped: 2}, pickCounts(c))
			assert.Equal(t, int64(4), jsonl.ReadMalformed(pr), "malformed lines")
		})
	}
}

// A 2h StateTTL on a file must not keep the job alive for 2h: on bounded
// input KeepFirst sets no processing-time timers, in either expansion.
func TestBuildOnGeneratedOrdersKeepsOnePerOrderAndEndsPromptly(t *testing.T) {
	gen := orders.Generate(300, 9)
	for _, tc := range pipelinetest.Expansions {
		t.Run(tc.Name, func(t *testing.T) {
			dir := t.TempDir()
			input, out := filepath.Join(dir, "in.jsonl"), filepath.Join(dir, "out.jsonl")
			require.NoError(t, orders.WriteSample(input, 300, 9))

			p, s := beam.NewPipelineWithRoot()
			opts := append([]dedup.Option{dedup.StateTTL(2 * time.Hour)}, tc.Options...)
			_, err := orders.Build(s, orders.Config{Input: input, Output: out, Dedup: opts})
			require.NoError(t, err)
			start := time.Now()
			pr := prismtest.Run(t, p, time.Minute)
			assert.Less(t, time.Since(start), 30*time.Second)

			lines := pipelinetest.ReadLines(t, out)
			assert.Len(t, lines, 300, "one row per distinct order_id")
			c := dedup.ReadCounters(pr)
			assert.Equal(t, int64(len(gen)), c.RowsIn)
			assert.Equal(t, int64(300), c.Emitted)
			assert.Equal(t, int64(len(gen)-300), c.DuplicatesDropped)
			assert.Zero(t, c.Pending())
			assert.NoFileExists(t, jsonl.ErrorsPath(out), "no dead letters, no errors file")
		})
	}
}

func TestBuildReportsConfigurationErrors(t *testing.T) {
	in := pipelinetest.Testdata("orders/input.jsonl")
	for _, tc := range []struct {
		name string
		cfg  orders.Config
		want string
	}{
		{"no input", orders.Config{}, "Input is required"},
		{"missing input", orders.Config{Input: "does-not-exist.jsonl"}, `input: no file matches "does-not-exist.jsonl"`},
		{"unknown column", orders.Config{Input: in, Dedup: []dedup.Option{rowspec.PartitionBy("customer")}}, "customer"},
		{"negative TTL", orders.Config{Input: in, Dedup: []dedup.Option{dedup.StateTTL(-time.Second)}}, "StateTTL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, s := beam.NewPipelineWithRoot()
			_, err := orders.Build(s, tc.cfg)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func pickCounts(c dedup.Counters) dedup.Counters {
	return dedup.Counters{RowsIn: c.RowsIn, Emitted: c.Emitted, DuplicatesDropped: c.DuplicatesDropped, DeadLettered: c.DeadLettered}
}

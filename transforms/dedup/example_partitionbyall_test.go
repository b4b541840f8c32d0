package dedup_test

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"

	"github.com/beamdedup/beamdedup/transforms/dedup"
)

// Fill is an execution report; a resent report repeats every column.
type Fill struct {
	OrderID  string  `beam:"order_id"`
	Quantity int64   `beam:"quantity"`
	Price    float64 `beam:"price"`
}

// distinctFills collects the kept rows (Prism runs the workers in this
// process).
var distinctFills struct {
	sync.Mutex
	rows []Fill
}

func keepFill(f Fill) {
	distinctFills.Lock()
	defer distinctFills.Unlock()
	distinctFills.rows = append(distinctFills.rows, f)
}

func init() {
	beam.RegisterType(reflect.TypeFor[Fill]())
	register.Function1x0(keepFill)
}

// Exact duplicates (the spec's 4.1.3.4): every column is the key, so only
// a row equal to an earlier one in every column is dropped. Here on bounded
// input (a file, say), where it is a merge per key with no per-row state.
func ExamplePartitionByAll() {
	p, s := beam.NewPipelineWithRoot()
	fills := beam.Create(s, Fill{"o1", 1, 10}, Fill{"o1", 1, 10}, Fill{"o1", 2, 10})
	beam.ParDo0(s, keepFill, dedup.KeepFirst(s, fills, dedup.PartitionByAll()).Rows)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := beam.Run(ctx, "prism", p); err != nil {
		panic(err)
	}
	sort.Slice(distinctFills.rows, func(i, j int) bool { return distinctFills.rows[i].Quantity < distinctFills.rows[j].Quantity })
	for _, f := range distinctFills.rows {
		fmt.Println(f.OrderID, f.Quantity, f.Price)
	}
	// Output:
	// o1 1 10
	// o1 2 10
}

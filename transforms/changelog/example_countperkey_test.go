package changelog_test

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
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/teststream"

	"github.com/beamdedup/beamdedup/transforms/changelog"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// Order is a version of an order: its status at time TS.
type Order struct {
	Op      string    `beam:"op"` // written by KeepLast: +I, -U, +U
	OrderID string    `beam:"order_id"`
	Status  string    `beam:"status"`
	TS      time.Time `beam:"ts"`
}

// statusCounts collects the counts (Prism runs the workers in this
// process).
var statusCounts struct {
	sync.Mutex
	rows []changelog.GroupCount
}

func keepCount(c changelog.GroupCount) {
	statusCounts.Lock()
	defer statusCounts.Unlock()
	statusCounts.rows = append(statusCounts.rows, c)
}

func init() {
	beam.RegisterType(reflect.TypeFor[Order]())
	register.Function1x0(keepCount)
}

// Orders per status: KeepLast turns the stream of order versions into a
// changelog of each order's current status (+I, then -U/+U pairs), and
// CountPerKey applies it to a count per status, so an order counts once,
// under its current status. On a stream CountPerKey emits a group's new
// count after every change; Latest keeps each group's last.
func ExampleCountPerKey() {
	at := func(mm int) time.Time { return time.Date(2024, 1, 1, 10, mm, 0, 0, time.UTC) }
	ts := teststream.NewConfig()
	for i, o := range []Order{
		{OrderID: "o1", Status: "created", TS: at(0)},
		{OrderID: "o2", Status: "created", TS: at(1)},
		{OrderID: "o3", Status: "created", TS: at(2)},
		{OrderID: "o1", Status: "paid", TS: at(5)},
		{OrderID: "o2", Status: "paid", TS: at(6)},
		{OrderID: "o1", Status: "shipped", TS: at(9)},
	} {
		if err := ts.AddElements(o.TS.UnixMilli(), o); err != nil {
			panic(err)
		}
		if err := ts.AdvanceWatermark(o.TS.UnixMilli() + int64(i)); err != nil {
			panic(err)
		}
	}
	if err := ts.AdvanceWatermarkToInfinity(); err != nil {
		panic(err)
	}

	p, s := beam.NewPipelineWithRoot()
	current := dedup.KeepLast(s, teststream.Create(s, ts), rowspec.PartitionBy("order_id"), rowspec.OnTime("ts"), rowspec.KindColumn("op"))
	counts := changelog.CountPerKey(s, current.Rows, rowspec.KindColumn("op"), changelog.GroupBy("status"))
	beam.ParDo0(s, keepCount, changelog.Latest(s, counts.Counts))

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := beam.Run(ctx, "prism", p); err != nil {
		panic(err)
	}
	sort.Slice(statusCounts.rows, func(i, j int) bool { return statusCounts.rows[i].Group < statusCounts.rows[j].Group })
	for _, c := range statusCounts.rows {
		fmt.Println(c.Group, c.Count)
	}
	// Output:
	// created 1
	// paid 1
	// shipped 1
}

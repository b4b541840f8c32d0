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
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/teststream"

	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// OrderStatus is a version of an order: its status at time TS.
type OrderStatus struct {
	Op      string    `beam:"op"` // written by KeepLast: +I, -U, +U
	OrderID string    `beam:"order_id"`
	Status  string    `beam:"status"`
	TS      time.Time `beam:"ts"`
}

// changes collects the changelog. Prism runs the workers in this process,
// so the example can read what they collected once the pipeline is done.
var changes struct {
	sync.Mutex
	rows []OrderStatus
}

func collectChange(r OrderStatus) {
	changes.Lock()
	defer changes.Unlock()
	changes.rows = append(changes.rows, r)
}

func init() {
	beam.RegisterType(reflect.TypeFor[OrderStatus]())
	register.Function1x0(collectChange)
}

// KeepLast turns a stream of versions into a changelog of each order's
// current status: +I for an order's first version, then a -U of the old
// version and a +U of the new one for each newer version. A version older
// than the stored one (by OnTime) changes nothing.
func ExampleKeepLast() {
	at := func(mm int) time.Time { return time.Date(2024, 1, 1, 10, mm, 0, 0, time.UTC) }
	ts := teststream.NewConfig()
	var wm int64
	for _, r := range []OrderStatus{
		{OrderID: "o1", Status: "created", TS: at(0)},
		{OrderID: "o2", Status: "created", TS: at(1)},
		{OrderID: "o1", Status: "paid", TS: at(5)},
		{OrderID: "o1", Status: "created", TS: at(2)}, // a late resend of an older version
	} {
		// Each row in a bundle of its own, in this order (Prism hands a
		// key the rows of one bundle in event-time order): the watermark
		// moves on after each; the last row is behind it.
		if err := ts.AddElements(r.TS.UnixMilli(), r); err != nil {
			panic(err)
		}
		wm = max(wm+1, r.TS.UnixMilli()) // it must move forward
		if err := ts.AdvanceWatermark(wm); err != nil {
			panic(err)
		}
	}
	if err := ts.AdvanceWatermarkToInfinity(); err != nil {
		panic(err)
	}

	p, s := beam.NewPipelineWithRoot()
	current := dedup.KeepLast(s, teststream.Create(s, ts),
		rowspec.PartitionBy("order_id"),
		rowspec.OnTime("ts"),     // the newest version wins, whatever the arrival order
		rowspec.KindColumn("op"), // where each output row's kind is written
		dedup.UID("order-status"))
	beam.ParDo0(s, collectChange, current.Rows)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := beam.Run(ctx, "prism", p); err != nil {
		panic(err)
	}
	// Each order's changes come in order; orders interleave as the runner
	// runs them, so print them by order.
	sort.SliceStable(changes.rows, func(i, j int) bool { return changes.rows[i].OrderID < changes.rows[j].OrderID })
	for _, r := range changes.rows {
		fmt.Println(r.Op, r.OrderID, r.Status, r.TS.Format("15:04"))
	}
	// Output:
	// +I o1 created 10:00
	// -U o1 created 10:00
	// +U o1 paid 10:05
	// +I o2 created 10:01
}

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

	"github.com/beamdedup/beamdedup/testing/deduptest"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// Click is a user's event at Rowtime.
type Click struct {
	UserID  string    `beam:"user_id"`
	Event   string    `beam:"event"`
	Rowtime time.Time `beam:"rowtime"`
}

// firstClicks collects the kept rows with their output timestamps (Prism
// runs the workers in this process).
var firstClicks struct {
	sync.Mutex
	rows []string
}

func keepClick(ts beam.EventTime, c Click) {
	firstClicks.Lock()
	defer firstClicks.Unlock()
	firstClicks.rows = append(firstClicks.rows, fmt.Sprintf("%s %s %s @%s",
		c.Rowtime.Format("15:04"), c.UserID, c.Event, ts.ToTime().UTC().Format("15:04")))
}

func init() {
	beam.RegisterType(reflect.TypeFor[Click]())
	register.Function2x0(keepClick)
}

// The spec's base case on a stream, as a test runs it: per key the row
// with the earliest event time, emitted once the watermark passes it, with
// its own time as its timestamp; a later-arriving earlier row replaces the
// candidate until then; after it, the key's rows are dropped as late until
// its state expires (StateTTL, processing time), and the key's next row
// starts a new period. The test clock makes processing time the row's event
// time, so the expiry happens at a time the test chooses.
func ExampleKeepFirst_eventTime() {
	deduptest.RegisterClock("event-time-clock", func(eventTime time.Time) time.Time { return eventTime })
	at := func(mm int) time.Time { return time.Date(2024, 1, 1, 10, mm, 0, 0, time.UTC) }
	ts := teststream.NewConfig()
	add := func(watermark time.Time, clicks ...Click) {
		for _, c := range clicks {
			if err := ts.AddElements(c.Rowtime.UnixMilli(), c); err != nil {
				panic(err)
			}
		}
		if err := ts.AdvanceWatermark(watermark.UnixMilli()); err != nil {
			panic(err)
		}
	}
	add(at(1).Add(-time.Second), Click{"u1", "click", at(2)}, Click{"u2", "buy", at(3)})
	add(at(4), Click{"u1", "view", at(1)})   // earlier than u1's candidate, before the watermark passed it: replaces it
	add(at(6), Click{"u1", "scroll", at(5)}) // u1 was emitted (10:01) and expires at 10:06: late, dropped
	add(at(10), Click{"u1", "login", at(9)}) // after u1's expiry: a new period
	if err := ts.AdvanceWatermarkToInfinity(); err != nil {
		panic(err)
	}

	p, s := beam.NewPipelineWithRoot()
	first := dedup.KeepFirst(s, teststream.Create(s, ts),
		rowspec.PartitionBy("user_id"),
		rowspec.OnTime("rowtime"),
		dedup.StateTTL(5*time.Minute),
		dedup.UID("first-clicks"),
		deduptest.UseClock("event-time-clock")) // for tests only; production reads the wall clock
	beam.ParDo0(s, keepClick, first.Rows)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := beam.Run(ctx, "prism", p); err != nil {
		panic(err)
	}
	sort.Strings(firstClicks.rows)
	for _, r := range firstClicks.rows {
		fmt.Println(r)
	}
	// Output:
	// 10:01 u1 view @10:01
	// 10:03 u2 buy @10:03
	// 10:09 u1 login @10:09
}

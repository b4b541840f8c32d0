package dedup_test

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/teststream"

	"github.com/beamdedup/beamdedup/transforms/dedup"
)

// Reading is a sensor's reading at a time (its element timestamp).
type Reading struct {
	SensorID string `beam:"sensor_id"`
	Value    int64  `beam:"value"`
}

// lastReadings collects the kept rows with their windows (Prism runs the
// workers in this process).
var lastReadings struct {
	sync.Mutex
	lines []string
}

func keepLastReading(w beam.Window, r Reading) {
	iw := w.(window.IntervalWindow)
	lastReadings.Lock()
	defer lastReadings.Unlock()
	lastReadings.lines = append(lastReadings.lines, fmt.Sprintf("[%s, %s) %s %d",
		iw.Start.ToTime().UTC().Format("15:04"), iw.End.ToTime().UTC().Format("15:04"), r.SensorID, r.Value))
}

func init() {
	beam.RegisterType(reflect.TypeFor[Reading]())
	register.Function2x0(keepLastReading)
}

// WindowLast keeps, per key and window, the row with the latest timestamp
// (or, with SequenceBy, the largest value of a column), and emits it once,
// when the window closes.
func ExampleWindowLast() {
	at := func(mm int) int64 { return time.Date(2024, 1, 1, 10, mm, 0, 0, time.UTC).UnixMilli() }
	ts := teststream.NewConfig()
	for _, e := range []struct {
		at      int64
		reading Reading
	}{{at(3), Reading{"s1", 12}}, {at(1), Reading{"s1", 7}}, {at(4), Reading{"s2", 30}}, {at(12), Reading{"s1", 9}}, {at(15), Reading{"s1", 40}}} {
		if err := ts.AddElements(e.at, e.reading); err != nil {
			panic(err)
		}
	}
	if err := ts.AdvanceWatermarkToInfinity(); err != nil {
		panic(err)
	}

	p, s := beam.NewPipelineWithRoot()
	windowed := beam.WindowInto(s, window.NewFixedWindows(10*time.Minute), teststream.Create(s, ts))
	last := dedup.WindowLast(s, windowed, dedup.PartitionBy("sensor_id"))
	beam.ParDo0(s, keepLastReading, last.Rows)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := beam.Run(ctx, "prism", p); err != nil {
		panic(err)
	}
	sort.Strings(lastReadings.lines)
	for _, l := range lastReadings.lines {
		fmt.Println(l)
	}
	// Output:
	// [10:00, 10:10) s1 12
	// [10:00, 10:10) s2 30
	// [10:10, 10:20) s1 40
}

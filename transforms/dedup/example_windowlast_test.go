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

	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// Reading is a sensor's reading; Seq orders a sensor's readings.
type Reading struct {
	SensorID string    `beam:"sensor_id"`
	Seq      int64     `beam:"seq"`
	Value    float64   `beam:"value"`
	At       time.Time `beam:"at"`
}

// stampReading gives a reading its time as its element timestamp, which
// chooses its window.
func stampReading(r Reading) (beam.EventTime, Reading) {
	return beam.EventTime(r.At.UnixMilli()), r
}

// lastReadings collects the kept rows (Prism runs the workers in this
// process).
var lastReadings struct {
	sync.Mutex
	rows []Reading
}

func keepReading(r Reading) {
	lastReadings.Lock()
	lastReadings.rows = append(lastReadings.rows, r)
	lastReadings.Unlock()
}

func init() {
	beam.RegisterType(reflect.TypeFor[Reading]())
	register.Function1x2(stampReading)
	register.Function1x0(keepReading)
}

// WindowLast keeps, per key and window, the row with the largest ordering
// value (here SequenceBy's column; without it, the latest timestamp), and
// emits it once, when the window closes. On bounded input, as here, the
// windows close at the end of the input.
func ExampleWindowLast() {
	at := func(mm int) time.Time { return time.Date(2024, 1, 1, 10, mm, 0, 0, time.UTC) }
	p, s := beam.NewPipelineWithRoot()
	readings := beam.ParDo(s, stampReading, beam.Create(s,
		Reading{"s1", 2, 20.5, at(4)},
		Reading{"s1", 3, 21.0, at(4)}, // the same time: Seq decides
		Reading{"s1", 1, 19.0, at(8)}, // later, but an older sequence number
		Reading{"s2", 1, 5.0, at(6)},
		Reading{"s1", 4, 22.5, at(13)}))
	windowed := beam.WindowInto(s, window.NewFixedWindows(10*time.Minute), readings)
	last := dedup.WindowLast(s, windowed, rowspec.PartitionBy("sensor_id"), rowspec.SequenceBy("seq"))
	beam.ParDo0(s, keepReading, last.Rows)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := beam.Run(ctx, "prism", p); err != nil {
		panic(err)
	}
	sort.Slice(lastReadings.rows, func(i, j int) bool {
		a, b := lastReadings.rows[i], lastReadings.rows[j]
		return a.At.Before(b.At) || a.At.Equal(b.At) && a.SensorID < b.SensorID
	})
	for _, r := range lastReadings.rows {
		fmt.Printf("%s #%d %.1f at %s\n", r.SensorID, r.Seq, r.Value, r.At.Format("15:04"))
	}
	// Output:
	// s1 #3 21.0 at 10:04
	// s2 #1 5.0 at 10:06
	// s1 #4 22.5 at 10:13
}

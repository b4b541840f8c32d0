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
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// Score is a player's score at a time (its element timestamp).
type Score struct {
	PlayerID string `beam:"player_id"`
	Points   int64  `beam:"points"`
}

// firstScores collects the kept rows with their windows (Prism runs the
// workers in this process).
var firstScores struct {
	sync.Mutex
	lines []string
}

func keepFirstScore(w beam.Window, s Score) {
	iw := w.(window.IntervalWindow)
	firstScores.Lock()
	defer firstScores.Unlock()
	firstScores.lines = append(firstScores.lines, fmt.Sprintf("[%s, %s) %s %d",
		iw.Start.ToTime().UTC().Format("15:04"), iw.End.ToTime().UTC().Format("15:04"), s.PlayerID, s.Points))
}

func init() {
	beam.RegisterType(reflect.TypeFor[Score]())
	register.Function2x0(keepFirstScore)
}

// WindowFirst keeps, per key and window, the row with the earliest
// timestamp, and emits it once, when the window closes. The input must be
// in windows other than the global one.
func ExampleWindowFirst() {
	at := func(mm int) int64 { return time.Date(2024, 1, 1, 10, mm, 0, 0, time.UTC).UnixMilli() }
	ts := teststream.NewConfig()
	for _, e := range []struct {
		at    int64
		score Score
	}{{at(3), Score{"p1", 12}}, {at(1), Score{"p1", 7}}, {at(4), Score{"p2", 30}}, {at(12), Score{"p1", 9}}, {at(15), Score{"p1", 40}}} {
		if err := ts.AddElements(e.at, e.score); err != nil {
			panic(err)
		}
	}
	if err := ts.AdvanceWatermarkToInfinity(); err != nil {
		panic(err)
	}

	p, s := beam.NewPipelineWithRoot()
	windowed := beam.WindowInto(s, window.NewFixedWindows(10*time.Minute), teststream.Create(s, ts))
	first := dedup.WindowFirst(s, windowed, rowspec.PartitionBy("player_id"))
	beam.ParDo0(s, keepFirstScore, first.Rows)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := beam.Run(ctx, "prism", p); err != nil {
		panic(err)
	}
	sort.Strings(firstScores.lines)
	for _, l := range firstScores.lines {
		fmt.Println(l)
	}
	// Output:
	// [10:00, 10:10) p1 7
	// [10:00, 10:10) p2 30
	// [10:10, 10:20) p1 9
}

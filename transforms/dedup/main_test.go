package dedup_test

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beamdedup/beamdedup/testing/prismtest"
	"github.com/beamdedup/beamdedup/transforms/dedup"
)

func TestMain(m *testing.M) { prismtest.Main(m) } // splitting off: notes/beam-defects.md 9

// Row types of the spec's examples.
type userEvent struct {
	UserName string `beam:"user_name"`
	Event    string `beam:"event"`
	Seq      int64  `beam:"seq"` // not a key column: tells which row was kept
}

type timedEvent struct {
	UserID  string    `beam:"user_id"`
	Event   string    `beam:"event"`
	Rowtime time.Time `beam:"rowtime"`
}

type changeRow struct {
	Op       string `beam:"op"`
	UserName string `beam:"user_name"`
	Event    string `beam:"event"`
}

func init() {
	beam.RegisterType(reflect.TypeFor[userEvent]())
	beam.RegisterType(reflect.TypeFor[timedEvent]())
	beam.RegisterType(reflect.TypeFor[changeRow]())
	register.Function2x1(formatTimed)
	register.Function1x1(formatUser)
}

// formatTimed renders a kept row with its output timestamp, so tests can
// assert both which row was kept and when it is timestamped.
func formatTimed(ts beam.EventTime, e timedEvent) string {
	return fmt.Sprintf("%s/%s@%s", e.UserID, e.Event, ts.ToTime().UTC().Format("15:04"))
}

func formatUser(e userEvent) string { return fmt.Sprintf("%s/%s#%d", e.UserName, e.Event, e.Seq) }

// at returns 2024-01-01 hh:mm UTC.
func at(hh, mm int) time.Time { return time.Date(2024, 1, 1, hh, mm, 0, 0, time.UTC) }

func ms(t time.Time) int64 { return t.UnixMilli() }

// run runs p on Prism with a deadline, so a hung pipeline fails the test
// instead of CI.
func run(t *testing.T, p *beam.Pipeline) dedup.Counters {
	t.Helper()
	return dedup.ReadCounters(prismtest.Run(t, p, 2*time.Minute))
}

func reflectType[T any]() reflect.Type { return reflect.TypeFor[T]() }

// runLast is run for a pipeline of KeepLast: its counters.
func runLast(t *testing.T, p *beam.Pipeline) dedup.LastCounters {
	t.Helper()
	return dedup.ReadLastCounters(prismtest.Run(t, p, 2*time.Minute))
}

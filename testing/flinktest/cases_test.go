package flinktest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/teststream"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/testing/flinktest"
	"github.com/beamdedup/beamdedup/testing/pgtest"
	"github.com/beamdedup/beamdedup/transforms/changelog"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/pgsink"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// The transforms' semantics on Flink as on Prism: each test builds the
// same pipeline for both runners and holds both to the same outputs. Where
// the runners differ (a key's delivery order, which counter a dropped row
// lands in), the test says so. Every call of the library's API is in this
// file. (The sink's test needs PostgreSQL: testing/pgtest.)

type event struct {
	Key    string    `beam:"key" json:"key"`
	Val    string    `beam:"val" json:"val"`
	Ts     time.Time `beam:"ts" json:"-"`
	Op     string    `beam:"op" json:"op,omitempty"`
	Status string    `beam:"status" json:"status,omitempty"`
}

func init() {
	registerTypes(event{})
	register.Function1x1(tickEvent)
	register.Function1x2(withEventTime)
}

// day is the date of the tests' event times; at(h, m) a time on it.
var day = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

func at(h, m int) time.Time {
	return day.Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute)
}

func ms(t time.Time) int64 { return t.UnixMilli() }

// withEventTime gives a row its ts as its element timestamp.
func withEventTime(e event) (beam.EventTime, event) { return beam.EventTime(e.Ts.UnixMilli()), e }

// tickEvent is a tick as a row of key k.
func tickEvent(int64) event { return event{Key: "k", Val: "tick"} }

// addEach adds each row to ts at its own event time, one event each, so
// that a runner delivers them in this order.
func addEach(t *testing.T, ts *teststream.Config, rows ...event) {
	for _, r := range rows {
		require.NoError(t, ts.AddElements(ms(r.Ts), r))
	}
}

func TestKeepFirst_WatermarklessOnBoundedInputKeepsTheSameRowOnBothRunners(t *testing.T) {
	for _, r := range runners {
		t.Run(string(r), func(t *testing.T) {
			p, s := beam.NewPipelineWithRoot()
			in := beam.Create(s,
				event{Key: "k1", Val: "b"}, event{Key: "k1", Val: "a"}, event{Key: "k2", Val: "c"},
				event{Key: "k1", Val: "b"}, event{Key: "k3", Val: "d"}, event{Key: "k3", Val: "d"})
			out := collect(s, dedup.KeepFirst(s, in, rowspec.PartitionBy("key")).Rows, false)
			c := dedup.ReadCounters(runOn(t, r, p, 2*time.Minute))
			// Bounded input is a merge of each key's rows by one ordering,
			// not arrival: the same row on every runner.
			assert.Equal(t, jsonRows(t, event{Key: "k1", Val: "a"}, event{Key: "k2", Val: "c"}, event{Key: "k3", Val: "d"}), rowsOf(out))
			assert.Equal(t, int64(6), c.RowsIn)
			assert.Equal(t, int64(3), c.Emitted)
			assert.Equal(t, int64(3), c.DuplicatesDropped)
		})
	}
}

// A stream's first arrival per key wins, emitted at once. Which copy of
// an identical row carries its timestamp out depends on the bundles:
// Prism gives each TestStream event a bundle of its own, so it is the
// first copy's (10:00); Flink's bundles hold up to 1000 elements or 1 s,
// and when both copies of b share one, KeepFirst's mini-batch fold may
// emit the later copy's (10:03).
func TestKeepFirst_WatermarklessOnAStreamKeepsTheFirstArrival(t *testing.T) {
	for _, r := range runners {
		t.Run(string(r), func(t *testing.T) {
			p, s := beam.NewPipelineWithRoot()
			ts := teststream.NewConfig()
			addEach(t, &ts,
				event{Key: "k1", Val: "b", Ts: at(10, 0)}, event{Key: "k2", Val: "c", Ts: at(10, 1)},
				event{Key: "k1", Val: "a", Ts: at(10, 2)}, event{Key: "k1", Val: "b", Ts: at(10, 3)})
			require.NoError(t, ts.AdvanceWatermarkToInfinity())
			out := collect(s, dedup.KeepFirst(s, teststream.Create(s, ts), rowspec.PartitionBy("key")).Rows, true)
			c := dedup.ReadCounters(runOn(t, r, p, 2*time.Minute))
			got := rowsOf(out)
			require.Len(t, got, 2)
			assert.Equal(t, `{"key":"k2","val":"c"}@10:01:00`, got[1])
			if r == onPrism {
				assert.Equal(t, `{"key":"k1","val":"b"}@10:00:00`, got[0])
			} else {
				assert.Contains(t, []string{`{"key":"k1","val":"b"}@10:00:00`, `{"key":"k1","val":"b"}@10:03:00`}, got[0])
			}
			assert.Equal(t, int64(4), c.RowsIn)
			assert.Equal(t, int64(2), c.Emitted)
		})
	}
}

// Spec 4.1.3.5 on a TestStream. On Prism the earlier 10:01 view replaces
// the 10:02 click while the watermark is below it, is emitted when the
// watermark passes 10:01, timestamped 10:01, and the 10:00 signup after
// that is late. On Flink the TestStream's watermarks reach the stateful
// step only when the bundle that carried the rows before them ends (Beam's
// Flink runner holds the watermark while a bundle is open: up to 1000
// elements or 1 s), so all four rows reach it before any watermark:
// KeepFirst emits the earliest, the signup, at the watermark, and nothing
// is late (TestKeepFirst_EventTimeOnFlinkDropsARowBehindTheWatermark has
// the late row in real time).
func TestKeepFirst_EventTimeEmitsTheEarliestRowAtTheWatermark(t *testing.T) {
	want := map[runner]string{onPrism: `{"key":"u1","val":"view"}@10:01:00`, onFlink: `{"key":"u1","val":"signup"}@10:00:00`}
	for _, r := range runners {
		t.Run(string(r), func(t *testing.T) {
			p, s := beam.NewPipelineWithRoot()
			ts := teststream.NewConfig()
			addEach(t, &ts, event{Key: "u1", Val: "click", Ts: at(10, 2)})
			require.NoError(t, ts.AdvanceWatermark(ms(at(9, 57))))
			addEach(t, &ts, event{Key: "u1", Val: "view", Ts: at(10, 1)})
			require.NoError(t, ts.AdvanceWatermark(ms(at(9, 57))+1))
			addEach(t, &ts, event{Key: "u1", Val: "scroll", Ts: at(10, 6)})
			require.NoError(t, ts.AdvanceWatermark(ms(at(10, 1))))
			addEach(t, &ts, event{Key: "u1", Val: "signup", Ts: at(10, 0)})
			require.NoError(t, ts.AdvanceWatermark(ms(at(10, 2))))
			require.NoError(t, ts.AdvanceWatermarkToInfinity())
			out := collect(s, dedup.KeepFirst(s, teststream.Create(s, ts), rowspec.PartitionBy("key"), rowspec.OnTime("ts"), dedup.StateTTL(5*time.Minute)).Rows, true)
			c := dedup.ReadCounters(runOn(t, r, p, 2*time.Minute))
			assert.Equal(t, []string{want[r]}, rowsOf(out))
			assert.Equal(t, int64(4), c.RowsIn)
			assert.Equal(t, int64(1), c.Emitted)
			assert.Zero(t, c.Pending(), "every row accounted for")
			if r == onPrism {
				assert.Equal(t, int64(1), c.CandidatesReplaced, "the click replaced by the earlier view")
				assert.Equal(t, int64(2), c.DuplicatesDropped+c.LateDropped, "scroll and signup dropped")
			} else {
				assert.Zero(t, c.LateDropped, "no watermark passed before the last row")
			}
		})
	}
}

// StateTTL is processing time: on Flink, real time. Ticks every 250 ms on
// one key into KeepFirst with a 6 s TTL, refreshed by each duplicate and
// not, until 64 ticks (16 s of them) have been read and each step has
// emitted its row: refreshed, the key never expires and one row comes
// out. The ticks arrive in bursts (flinktest.Ticks is resumed about once
// a second), and a job's start takes from a few seconds to half a minute
// on a loaded machine, during which the ticks pile up and arrive at once;
// hence counting ticks, not time, and a TTL well above the gaps. The stateful step's timers lag the same way: in our runs the
// unrefreshed key expired at most once before the ticks ended, so that
// case is only logged. Flink reports a running job's metrics only when it
// ends, and this job is cancelled, so only outputs are counted.
func TestKeepFirst_StateTTLWithRefreshOnFlinkKeepsABusyKeyOnce(t *testing.T) {
	flinktest.SharedCluster(t) // started before the ticks' clock
	const want = 64
	p, s := beam.NewPipelineWithRoot()
	ticks := beam.ParDo(s, tickEvent, flinktest.Ticks(s, time.Now(), time.Now().Add(time.Hour), 250*time.Millisecond))
	all := collect(s, ticks, false)
	refreshed := collect(s, dedup.KeepFirst(s, ticks, rowspec.PartitionBy("key"),
		dedup.StateTTL(6*time.Second), dedup.ResetTTLOnDuplicate(true), dedup.UID("refreshed")).Rows, false)
	unrefreshed := collect(s, dedup.KeepFirst(s, ticks, rowspec.PartitionBy("key"),
		dedup.StateTTL(6*time.Second), dedup.ResetTTLOnDuplicate(false), dedup.UID("unrefreshed")).Rows, false)
	// The collector of every tick and the step's outputs are separate
	// stages: wait for both.
	runUntil(t, p, func() bool {
		return len(rowsOf(all)) >= want && len(rowsOf(refreshed)) > 0 && len(rowsOf(unrefreshed)) > 0
	}, 3*time.Minute)
	assert.Len(t, rowsOf(refreshed), 1, "rows out of the refreshed TTL")
	assert.NotEmpty(t, rowsOf(unrefreshed))
	t.Logf("%d ticks; rows out: %d refreshed, %d unrefreshed", len(rowsOf(all)), len(rowsOf(refreshed)), len(rowsOf(unrefreshed)))
}

// Keep-last's changelog on a stream: +I for a key's first row, a -U/+U
// pair for a newer one, nothing for an identical resend. Prism hands a key
// its rows in event-time order and emits every change. Flink may hand them
// over in another order (see the MiniBatch(false) test below): a row that
// arrives after a newer one is out of order and emits nothing (+I paid,
// for created and paid): the changelog applied gives the same rows.
func TestKeepLast_ChangelogOnAStreamAppliesToTheSameRowsOnBothRunners(t *testing.T) {
	for _, r := range runners {
		t.Run(string(r), func(t *testing.T) {
			p, s := beam.NewPipelineWithRoot()
			ts := teststream.NewConfig()
			addEach(t, &ts,
				event{Key: "o1", Status: "created", Ts: at(9, 0)},
				event{Key: "o2", Status: "created", Ts: at(9, 1)},
				event{Key: "o1", Status: "paid", Ts: at(9, 4)},
				event{Key: "o1", Status: "paid", Ts: at(9, 4)}) // an identical resend
			require.NoError(t, ts.AdvanceWatermarkToInfinity())
			out := collect(s, dedup.KeepLast(s, teststream.Create(s, ts), rowspec.PartitionBy("key"), rowspec.OnTime("ts"), rowspec.KindColumn("op"), dedup.MiniBatch(false)).Rows, false)
			c := dedup.ReadLastCounters(runOn(t, r, p, 2*time.Minute))
			got := rowsOf(out)
			if r == onPrism {
				assert.Equal(t, jsonRows(t,
					event{Key: "o1", Status: "created", Op: "+I"}, event{Key: "o2", Status: "created", Op: "+I"},
					event{Key: "o1", Status: "created", Op: "-U"}, event{Key: "o1", Status: "paid", Op: "+U"}), got)
				assert.Equal(t, int64(1), c.DuplicatesDropped, "the resend")
			} else {
				t.Logf("flink: %v", got)
			}
			assert.Equal(t, []string{"o1 paid", "o2 created"}, applied(t, got))
			assert.Zero(t, c.Unaccounted())
		})
	}
}

// applied is the rows a changelog leaves, as "key status", sorted: every
// +I/+U row less the -U/-D rows, whatever order the changelog came in.
func applied(t *testing.T, changelog []string) []string {
	n := map[string]int{}
	for _, line := range changelog {
		var e event
		require.NoError(t, json.Unmarshal([]byte(line), &e))
		switch e.Op {
		case "+I", "+U":
			n[e.Key+" "+e.Status]++
		case "-U", "-D":
			n[e.Key+" "+e.Status]--
		}
	}
	var rows []string
	for row, c := range n {
		require.GreaterOrEqual(t, c, 0, "%s retracted more often than added", row)
		for range c {
			rows = append(rows, row)
		}
	}
	slices.Sort(rows)
	return rows
}

// Upserts: +I for a key's first row, +U for each newer one. Prism emits
// every version; on Flink a row that reaches the step after a newer one is
// out of order and emits nothing (+U shipped after +I created): the key's
// final row is the same.
func TestKeepLast_UpsertsOnAStreamEndWithTheKeysLastRowOnBothRunners(t *testing.T) {
	for _, r := range runners {
		t.Run(string(r), func(t *testing.T) {
			p, s := beam.NewPipelineWithRoot()
			ts := teststream.NewConfig()
			addEach(t, &ts,
				event{Key: "o1", Status: "created", Ts: at(9, 0)},
				event{Key: "o1", Status: "paid", Ts: at(9, 4)},
				event{Key: "o1", Status: "shipped", Ts: at(9, 9)})
			require.NoError(t, ts.AdvanceWatermarkToInfinity())
			out := collect(s, dedup.KeepLast(s, teststream.Create(s, ts), rowspec.PartitionBy("key"), rowspec.OnTime("ts"), rowspec.KindColumn("op"), rowspec.Upsert(), dedup.MiniBatch(false)).Rows, false)
			c := dedup.ReadLastCounters(runOn(t, r, p, 2*time.Minute))
			got := rowsOf(out)
			if r == onPrism {
				assert.Equal(t, jsonRows(t,
					event{Key: "o1", Status: "created", Op: "+I"}, event{Key: "o1", Status: "paid", Op: "+U"},
					event{Key: "o1", Status: "shipped", Op: "+U"}), got)
			} else {
				t.Logf("flink: %v", got)
			}
			assert.Contains(t, got, jsonRows(t, event{Key: "o1", Status: "shipped", Op: "+U"})[0], "the key's last row")
			assert.Equal(t, int64(1), c.Inserts)
			assert.Zero(t, c.Unaccounted())
		})
	}
}

// MiniBatch(false) emits a change for every row that reaches KeepLast's
// stateful step and changes its key, on Flink as on Prism: five versions
// of a key, each a TestStream event of its own. In arrival order (no
// OnTime) every row is a change, +I for the first to arrive and a -U/+U
// pair for each of the others, in whatever order the runner hands them
// to the step. Flink does not hand them over in the TestStream's order:
// its TestStream source runs alone (one subtask) and the keying step on
// every core, so Flink deals the rows out round-robin and the stateful
// step gets them as the two keying subtasks pass them on. Ordered by
// OnTime, a row that arrives after a newer one is then dropped as out of
// order, counted; nothing is folded away before the step.
func TestKeepLast_MiniBatchOffEmitsAChangeForEveryRowThatReachesTheStepOnBothRunners(t *testing.T) {
	for _, r := range runners {
		for _, ordered := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/ordered_%v", r, ordered), func(t *testing.T) {
				p, s := beam.NewPipelineWithRoot()
				ts := teststream.NewConfig()
				statuses := []string{"created", "paid", "packed", "shipped", "delivered"}
				for i, st := range statuses {
					addEach(t, &ts, event{Key: "o1", Status: st, Ts: at(9, i)})
				}
				require.NoError(t, ts.AdvanceWatermarkToInfinity())
				opts := []dedup.Option{rowspec.PartitionBy("key"), rowspec.KindColumn("op"), dedup.MiniBatch(false)}
				if ordered {
					opts = append(opts, rowspec.OnTime("ts"))
				}
				out := collect(s, dedup.KeepLast(s, teststream.Create(s, ts), opts...).Rows, false)
				c := dedup.ReadLastCounters(runOn(t, r, p, 2*time.Minute))
				got := rowsOf(out)
				t.Logf("%s: %v; %d updates, %d out of order", r, got, c.Updates, c.OutOfOrderDropped)
				var versions int
				for _, line := range got {
					var e event
					require.NoError(t, json.Unmarshal([]byte(line), &e))
					if e.Op == "+I" || e.Op == "+U" {
						versions++
					}
				}
				assert.Zero(t, c.Superseded, "no row folded away before the step")
				assert.Equal(t, int64(1), c.Inserts)
				assert.Equal(t, 1+c.Updates, int64(versions), "a +I or +U for every row that changed the key")
				assert.Len(t, applied(t, got), 1, "the key ends with one row")
				if ordered {
					assert.Equal(t, int64(len(statuses)-1), c.Updates+c.OutOfOrderDropped, "every later row a change or out of order")
					assert.Equal(t, []string{"o1 delivered"}, applied(t, got), "the newest row")
				} else {
					assert.Equal(t, int64(len(statuses)-1), c.Updates, "every later row a change")
				}
				if r == onPrism {
					assert.Equal(t, int64(len(statuses)-1), c.Updates, "Prism hands them over in order")
				}
				assert.Zero(t, c.Unaccounted())
			})
		}
	}
}

// On bounded input with the stateful expansion, Flink (batch mode) hands
// a key's rows to the stateful step in no particular order, Prism in
// event-time order: the changelog's pairs differ (an older row after a
// newer one is dropped as out of order), each key's final row does not.
// The count per status is the combine expansion's, which needs no order.
func TestKeepLast_StatefulOnBoundedInputEndsWithTheSameRowPerKeyOnBothRunners(t *testing.T) {
	for _, r := range runners {
		t.Run(string(r), func(t *testing.T) {
			p, s := beam.NewPipelineWithRoot()
			var rows []any
			for i := range 20 {
				for j, st := range []string{"created", "paid", "shipped"} {
					rows = append(rows, event{Key: fmt.Sprintf("o%02d", i), Status: st, Ts: at(9, i+20*j)})
				}
			}
			in := beam.ParDo(s, withEventTime, beam.Create(s, rows...))
			last := dedup.KeepLast(s, in, rowspec.PartitionBy("key"), rowspec.OnTime("ts"), rowspec.KindColumn("op"), dedup.AsStream(), dedup.MiniBatch(false))
			counts := changelog.CountPerKey(s, last.Rows, rowspec.KindColumn("op"), changelog.GroupBy("status")).Counts
			final := collect(s, counts, false)
			c := dedup.ReadLastCounters(runOn(t, r, p, 2*time.Minute))
			got := rowsOf(final)
			require.Len(t, got, 3, "a count per status")
			assert.Contains(t, got[0], `"group":"created","count":0,`)
			assert.Contains(t, got[1], `"group":"paid","count":0,`)
			assert.Contains(t, got[2], `"group":"shipped","count":20,`)
			assert.Equal(t, int64(20), c.Inserts)
			assert.Zero(t, c.Unaccounted())
			if r == onPrism {
				assert.Equal(t, int64(40), c.Updates, "every later row a change, in event-time order")
			}
			t.Logf("%s: %d of 40 later rows changes, %d out of order", r, c.Updates, c.OutOfOrderDropped)
		})
	}
}

func TestWindowFirst_OneRowPerKeyAndWindowOnBothRunners(t *testing.T) {
	for _, r := range runners {
		t.Run(string(r), func(t *testing.T) {
			p, s := beam.NewPipelineWithRoot()
			in := beam.ParDo(s, withEventTime, beam.Create(s,
				event{Key: "p1", Val: "a", Ts: at(10, 1)}, event{Key: "p1", Val: "b", Ts: at(10, 3)},
				event{Key: "p1", Val: "c", Ts: at(10, 12)}, event{Key: "p2", Val: "d", Ts: at(10, 4)}))
			w := beam.WindowInto(s, window.NewFixedWindows(10*time.Minute), in)
			out := collect(s, dedup.WindowFirst(s, w, rowspec.PartitionBy("key"), rowspec.OnTime("ts")).Rows, false)
			runOn(t, r, p, 2*time.Minute)
			assert.Equal(t, jsonRows(t, event{Key: "p1", Val: "a"}, event{Key: "p1", Val: "c"}, event{Key: "p2", Val: "d"}), rowsOf(out))
		})
	}
}

// The -U of o1 comes ahead of the +I it retracts, as after a shuffle: the
// count is a sum, and ends the same in any order.
func TestCountPerKey_AppliesAChangelogOnBothRunners(t *testing.T) {
	changes := []event{
		{Key: "o1", Status: "created", Op: "-U"}, {Key: "o2", Status: "created", Op: "+I"},
		{Key: "o1", Status: "created", Op: "+I"}, {Key: "o1", Status: "paid", Op: "+U"},
	}
	for _, r := range runners {
		for _, stream := range []bool{false, true} {
			t.Run(string(r)+map[bool]string{false: "/bounded", true: "/stream"}[stream], func(t *testing.T) {
				p, s := beam.NewPipelineWithRoot()
				var in beam.PCollection
				if stream {
					ts := teststream.NewConfig()
					for i, e := range changes {
						e.Ts = at(9, i)
						addEach(t, &ts, e)
					}
					require.NoError(t, ts.AdvanceWatermarkToInfinity())
					in = teststream.Create(s, ts)
				} else {
					var rows []any
					for _, e := range changes {
						rows = append(rows, e)
					}
					in = beam.Create(s, rows...)
				}
				counted := changelog.CountPerKey(s, in, rowspec.KindColumn("op"), changelog.GroupBy("status"))
				counts, dead := counted.Counts, counted.DeadLetters
				final := collect(s, changelog.Latest(s, counts), false)
				bad := collect(s, dead, false)
				runOn(t, r, p, 2*time.Minute)
				assert.Empty(t, rowsOf(bad))
				got := rowsOf(final)
				require.Len(t, got, 2)
				assert.Contains(t, got[0], `"group":"created","count":1,`)
				assert.Contains(t, got[1], `"group":"paid","count":1,`)
			})
		}
	}
}

// The sink on both runners: KeepLast's changelog of a stream, written into
// a throwaway PostgreSQL table guarded by ts, leaves each key's last row,
// whatever the bundles folded.
func TestPgsink_WritesEachKeysLastRowOnBothRunners(t *testing.T) {
	cluster := pgtest.Shared(t)
	for _, r := range runners {
		t.Run(string(r), func(t *testing.T) {
			ctx := context.Background()
			db := "sink_" + string(r)
			dsn, err := cluster.CreateDatabase(ctx, db)
			require.NoError(t, err)
			conn, err := cluster.Connect(ctx, db)
			require.NoError(t, err)
			defer conn.Close(ctx)
			_, err = conn.Exec(ctx, `CREATE TABLE status (key text PRIMARY KEY, val text, ts timestamptz, status text, deleted boolean NOT NULL DEFAULT false)`)
			require.NoError(t, err)

			p, s := beam.NewPipelineWithRoot()
			ts := teststream.NewConfig()
			addEach(t, &ts,
				event{Key: "o1", Status: "created", Ts: at(9, 0)}, event{Key: "o2", Status: "created", Ts: at(9, 1)},
				event{Key: "o1", Status: "paid", Ts: at(9, 4)}, event{Key: "o1", Status: "paid", Ts: at(9, 4)},
				event{Key: "o2", Status: "cancelled", Ts: at(9, 6)}, event{Key: "o1", Status: "shipped", Ts: at(9, 9)})
			require.NoError(t, ts.AdvanceWatermarkToInfinity())
			changes := dedup.KeepLast(s, teststream.Create(s, ts), rowspec.PartitionBy("key"), rowspec.OnTime("ts"), rowspec.KindColumn("op"))
			dead := collect(s, pgsink.Write(s, changes.Rows, pgsink.DSN(dsn), pgsink.Table("status"),
				rowspec.PartitionBy("key"), rowspec.KindColumn("op"), rowspec.OnTime("ts"), pgsink.Tombstone("deleted")).DeadLetters, false)
			runOn(t, r, p, 2*time.Minute)
			assert.Empty(t, rowsOf(dead))
			rows, err := conn.Query(ctx, `SELECT key || ' ' || status FROM status WHERE NOT deleted ORDER BY key`)
			require.NoError(t, err)
			got, err := pgx.CollectRows(rows, pgx.RowTo[string])
			require.NoError(t, err)
			assert.Equal(t, []string{"o1 shipped", "o2 cancelled"}, got)
		})
	}
}

package dedup_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/teststream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/testing/deduptest"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// playerActivity is seed 002's gaming_player_activity row; its $rowtime is
// the element timestamp.
type playerActivity struct {
	PlayerID    int32  `beam:"player_id"`
	GameRoomID  int32  `beam:"game_room_id"`
	Points      int32  `beam:"points"`
	Coordinates string `beam:"coordinates"`
}

// timedActivity carries a playerActivity and its $rowtime into a bounded
// PCollection, which stampActivity turns into the element timestamp.
type timedActivity struct {
	RowtimeMs int64
	Row       playerActivity
}

type seqEvent struct {
	UserID string `beam:"user_id"`
	Event  string `beam:"event"`
	Seq    int64  `beam:"seq"`
}

func init() {
	beam.RegisterType(reflectType[playerActivity]())
	beam.RegisterType(reflectType[timedActivity]())
	beam.RegisterType(reflectType[seqEvent]())
	register.Function2x0(stampActivity)
	register.Emitter2[beam.EventTime, playerActivity]()
	register.Function3x1(formatSeedRow)
	register.Function3x1(formatSeqWindowed)
}

func stampActivity(r timedActivity, emit func(beam.EventTime, playerActivity)) {
	emit(beam.EventTime(r.RowtimeMs), r.Row)
}

// formatSeedRow renders a kept row as seed 002's result table does:
// $rowtime, points, game_room_id, player_id, window_start, window_end.
func formatSeedRow(w beam.Window, ts beam.EventTime, r playerActivity) string {
	iw := w.(window.IntervalWindow)
	return fmt.Sprintf("%s %d %d %d %s %s", ts.ToTime().UTC().Format("2006-01-02 15:04:05.000"),
		r.Points, r.GameRoomID, r.PlayerID, iw.Start.ToTime().UTC().Format("15:04"), iw.End.ToTime().UTC().Format("15:04"))
}

func formatSeqWindowed(w beam.Window, ts beam.EventTime, e seqEvent) string {
	return fmt.Sprintf("%s/%s@%s %s", e.UserID, e.Event, hhmm(ts), windowString(w))
}

// Seed 002: the last row of every 10-minute tumbling window, with no
// partition key (the whole window is one partition), ordered by $rowtime
// DESC. The result table is the seed's; the same input as a bounded
// PCollection gives the same rows.
func TestWindowLast_Seed002_LastRowOfEveryTenMinuteTumblingWindow(t *testing.T) {
	day := time.Date(2023, 11, 3, 0, 0, 0, 0, time.UTC)
	rt := func(hh, mm, ss, milli int) int64 {
		return day.Add(time.Duration(hh)*time.Hour + time.Duration(mm)*time.Minute + time.Duration(ss)*time.Second + time.Duration(milli)*time.Millisecond).UnixMilli()
	}
	// In arrival order; each window's last row arrives before some earlier
	// ones, and the watermark lags 5 s behind the largest time seen.
	rows := []timedActivity{
		{rt(19, 55, 1, 0), playerActivity{1051, 1144, 371, "[65,36]"}},
		{rt(19, 59, 59, 407), playerActivity{1094, 2504, 371, "[10,11]"}},
		{rt(19, 58, 30, 0), playerActivity{1079, 3451, 38, "[20,71]"}},
		{rt(20, 3, 0, 0), playerActivity{1017, 4177, 419, "[63,05]"}},
		{rt(20, 9, 59, 921), playerActivity{1036, 4342, 188, "[44,12]"}},
		{rt(20, 9, 59, 900), playerActivity{1092, 1801, 209, "[31,67]"}},
		{rt(20, 19, 59, 741), playerActivity{1046, 3427, 128, "[02,93]"}},
		{rt(20, 12, 0, 0), playerActivity{1074, 3013, 401, "[32,69]"}},
		{rt(20, 21, 0, 0), playerActivity{1003, 1038, 284, "[18,32]"}},
		{rt(20, 29, 59, 992), playerActivity{1049, 1000, 311, "[77,08]"}},
		{rt(20, 35, 0, 0), playerActivity{1081, 2265, 196, "[78,68]"}},
		{rt(20, 39, 59, 569), playerActivity{1062, 1217, 429, "[55,40]"}},
		{rt(20, 30, 0, 0), playerActivity{1051, 1144, 12, "[65,36]"}},
	}
	want := []any{
		"2023-11-03 19:59:59.407 371 2504 1094 19:50 20:00",
		"2023-11-03 20:09:59.921 188 4342 1036 20:00 20:10",
		"2023-11-03 20:19:59.741 128 3427 1046 20:10 20:20",
		"2023-11-03 20:29:59.992 311 1000 1049 20:20 20:30",
		"2023-11-03 20:39:59.569 429 1217 1062 20:30 20:40",
	}
	ts := teststream.NewConfig()
	var maxTime int64
	var bounded []any
	for _, r := range rows {
		require.NoError(t, ts.AddElements(r.RowtimeMs, r.Row))
		if r.RowtimeMs > maxTime {
			maxTime = r.RowtimeMs
			require.NoError(t, ts.AdvanceWatermark(maxTime-5000))
		}
		bounded = append(bounded, r)
	}
	require.NoError(t, ts.AdvanceWatermarkToInfinity())

	p, s := beam.NewPipelineWithRoot()
	tumble := window.NewFixedWindows(10 * time.Minute)
	stream := beam.WindowInto(s, tumble, teststream.Create(s, ts))
	last := dedup.WindowLast(s.Scope("stream"), stream).Rows
	passert.Equals(s, global(s, beam.ParDo(s, formatSeedRow, last)), want...)
	batch := beam.WindowInto(s, tumble, beam.ParDo(s, stampActivity, beam.Create(s, bounded...)))
	lastBatch := dedup.WindowLast(s.Scope("batch"), batch).Rows
	passert.Equals(s, global(s, beam.ParDo(s, formatSeedRow, lastBatch)), want...)
	c := run(t, p)
	assert.Equal(t, dedup.Counters{RowsIn: 26, Emitted: 10, DuplicatesDropped: 16}, deduptest.RowCounts(c))
}

// SequenceBy orders a window's rows by the column, before the timestamp:
// WindowLast keeps the largest value, WindowFirst the smallest; without it
// the timestamp decides. WindowLast breaks ties by the larger encoded row.
func TestWindowLast_SequenceByOrdersBeforeTheTimestampAndTiesKeepTheLargerRow(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	ts := teststream.NewConfig()
	for _, r := range []struct {
		at time.Time
		e  seqEvent
	}{
		{at(10, 1), seqEvent{"u1", "s3", 3}},
		{at(10, 2), seqEvent{"u1", "s1", 1}},
		{at(10, 3), seqEvent{"u1", "s2", 2}},
		{at(10, 4), seqEvent{"u2", "x", 7}}, // u2: a tie on seq and time
		{at(10, 4), seqEvent{"u2", "y", 7}},
	} {
		require.NoError(t, ts.AddElements(ms(r.at), r.e))
	}
	require.NoError(t, ts.AdvanceWatermarkToInfinity())
	in := beam.WindowInto(s, window.NewFixedWindows(10*time.Minute), teststream.Create(s, ts))
	for _, tc := range []struct {
		name string
		dd   func(beam.Scope, beam.PCollection, ...dedup.Option) dedup.Result
		opts []dedup.Option
		want []any
	}{
		{"last by seq", dedup.WindowLast, []dedup.Option{rowspec.SequenceBy("seq")}, []any{"u1/s3@10:01 [10:00,10:10)", "u2/y@10:04 [10:00,10:10)"}},
		{"first by seq", dedup.WindowFirst, []dedup.Option{rowspec.SequenceBy("seq")}, []any{"u1/s1@10:02 [10:00,10:10)", "u2/x@10:04 [10:00,10:10)"}},
		{"last by time", dedup.WindowLast, nil, []any{"u1/s2@10:03 [10:00,10:10)", "u2/y@10:04 [10:00,10:10)"}},
	} {
		out := tc.dd(s.Scope(tc.name), in, append(tc.opts, rowspec.PartitionBy("user_id"))...).Rows
		passert.Equals(s, global(s, beam.ParDo(s, formatSeqWindowed, out)), tc.want...)
	}
	c := run(t, p)
	assert.Equal(t, dedup.Counters{RowsIn: 15, Emitted: 6, DuplicatesDropped: 9}, deduptest.RowCounts(c))
}

// Session windows merge for WindowLast too: the last row of the merged
// session is kept; sliding windows keep a row in each window where it is
// the last.
func TestWindowLast_SessionAndSlidingWindows(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	rows := beam.Create(s,
		timedEvent{"u1", "c", at(10, 8)}, timedEvent{"u1", "b", at(10, 4)},
		timedEvent{"u1", "a", at(10, 0)}, timedEvent{"u1", "d", at(10, 30)})
	sessions := dedup.WindowLast(s.Scope("sessions"), windowed(s, window.NewSessions(5*time.Minute), rows), rowspec.PartitionBy("user_id")).Rows
	passert.Equals(s, global(s, beam.ParDo(s, formatWindowed, sessions)),
		"u1/c@10:08 [10:00,10:13)", "u1/d@10:30 [10:30,10:35)")
	sliding := dedup.WindowLast(s.Scope("sliding"), windowed(s, window.NewSlidingWindows(5*time.Minute, 10*time.Minute), rows), rowspec.PartitionBy("user_id")).Rows
	passert.Equals(s, global(s, beam.ParDo(s, formatWindowed, sliding)),
		"u1/b@10:04 [09:55,10:05)", "u1/c@10:08 [10:00,10:10)", "u1/c@10:08 [10:05,10:15)",
		"u1/d@10:30 [10:25,10:35)", "u1/d@10:30 [10:30,10:40)")
	run(t, p)
}

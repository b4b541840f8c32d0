package streaming

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/pipelines/orders"
	"github.com/beamdedup/beamdedup/testing/kafkatest"
	"github.com/beamdedup/beamdedup/testing/pgtest"
	"github.com/beamdedup/beamdedup/testing/prismtest"
	"github.com/beamdedup/beamdedup/transforms/dedup"
)

// seedTopics creates the input (2 partitions), output and dead-letter
// topics of a test, writes the seed's orders (count orders, every one
// priced under 100 twice) and three undecodable values, and returns the
// source.
func seedTopics(t *testing.T, b *kafkatest.Broker, count int) (Kafka, []orders.Order) {
	t.Helper()
	cfg := Kafka{Brokers: b.Addr, InputTopic: b.NewTopic(t, 2), OutputTopic: b.NewTopic(t, 2), DeadLetterTopic: b.NewTopic(t, 1),
		Group: "g-" + t.Name()}
	rows := orders.Generate(count, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, ProduceOrders(ctx, b.Addr, cfg.InputTopic, rows, "not json", `{"order_id": ""}`, `{"price": 3}`))
	return cfg, rows
}

func distinctOrders(rows []orders.Order) int {
	ids := map[string]bool{}
	for _, o := range rows {
		ids[o.OrderID] = true
	}
	return len(ids)
}

// The seed's pipeline end to end, watermarkless and by event time on
// created_at: one output record per order, the undecodable ones
// dead-lettered with their bytes, every record accounted for, and every
// offset committed.
func TestRunWritesOneRecordPerOrderAndCommitsEveryOffset(t *testing.T) {
	b := kafkatest.Shared(t)
	for _, onTime := range []string{"", "created_at"} {
		t.Run("on_time="+onTime, func(t *testing.T) {
			src, rows := seedTopics(t, b, 1000)
			cfg := Config{OnTime: onTime, Dedup: []dedup.Option{dedup.CleanupTimers(false)}}
			out, dlq := b.Count(t, src.OutputTopic), b.Count(t, src.DeadLetterTopic)
			res, err := Run(context.Background(), prismtest.Options(t, 3*time.Minute), src, RunConfig{Config: cfg, IdleStop: 2 * time.Second})
			require.NoError(t, err)
			t.Logf("%v", res.Status)

			n := distinctOrders(rows)
			require.Less(t, n, len(rows), "the seed has duplicates")
			waitFor(t, time.Minute, "every order and dead letter consumed", func() bool { return out.Total() >= n && dlq.Total() >= 3 })
			assert.Equal(t, n, out.Distinct())
			assert.Equal(t, n, out.Total(), "one record per order")
			assert.Equal(t, 3, dlq.Total())
			for _, r := range dlq.Records() {
				assert.Contains(t, []string{"not json", `{"order_id": ""}`, `{"price": 3}`}, string(r.Value), "the dead letter carries the bytes")
				assert.Condition(t, func() bool {
					for _, h := range r.Headers {
						if h.Key == DLQReason && len(h.Value) > 0 {
							return true
						}
					}
					return false
				}, "a reason header")
			}
			if onTime != "" {
				for _, r := range out.Records() {
					var o orders.Order
					for _, row := range rows {
						if row.OrderID == string(r.Key) {
							o = row
						}
					}
					assert.True(t, o.CreatedAt.Equal(r.Timestamp), "the output record's timestamp is created_at")
				}
			}
			s := res.Status
			assert.Equal(t, int64(len(rows)+3), s.Read)
			assert.Equal(t, s.Read, s.Dedup.RowsIn+s.DeadLettered, "every record decoded or dead-lettered")
			assert.Equal(t, s.Dedup.RowsIn, s.Dedup.Emitted+s.Dedup.DuplicatesDropped+s.Dedup.LateDropped, "every row emitted or dropped")
			assert.Equal(t, int64(n), s.Dedup.Emitted)
			assert.Equal(t, s.Read, s.Settled, "every record marked safe")
			assert.Equal(t, res.End, res.Committed, "every offset committed")
		})
	}
}

func TestRunWritesEveryOrderIntoPostgresOnce(t *testing.T) {
	b := kafkatest.Shared(t)
	dsn := pgtest.Shared(t).NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, CreateTable(ctx, dsn, DefaultTable))
	src, rows := seedTopics(t, b, 500)
	cfg := Config{Postgres: dsn, Dedup: []dedup.Option{dedup.CleanupTimers(false)}}
	res, err := Run(context.Background(), prismtest.Options(t, 3*time.Minute), src, RunConfig{Config: cfg, IdleStop: 2 * time.Second})
	require.NoError(t, err)
	n := distinctOrders(rows)
	assert.Equal(t, int64(n), res.PostgresWritten)
	assert.Equal(t, res.End, res.Committed)

	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var count, distinct int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*), count(DISTINCT order_id) FROM orders`).Scan(&count, &distinct))
	assert.Equal(t, n, count)
	assert.Equal(t, n, distinct)
}

func TestRunRefusesATopicThatDoesNotExistNamingIt(t *testing.T) {
	b := kafkatest.Shared(t)
	src := Kafka{Brokers: b.Addr, InputTopic: b.NewTopic(t, 2), OutputTopic: "missing-out", DeadLetterTopic: b.NewTopic(t, 1), Group: "g"}
	_, err := Run(context.Background(), prismtest.Options(t, time.Minute), src, RunConfig{IdleStop: time.Second})
	require.EqualError(t, err, fmt.Sprintf("kafka: topic missing-out does not exist on %s", b.Addr))
}

func TestBuildRejectsAnIncompleteConfigNamingWhatIsMissing(t *testing.T) {
	_, err := Run(context.Background(), prismtest.Options(t, time.Minute), Kafka{Brokers: "h:1", InputTopic: "a"}, RunConfig{})
	require.EqualError(t, err, "kafka: Kafka needs [OutputTopic DeadLetterTopic Group]")
}

// waitFor polls cond every 50ms until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			require.FailNow(t, "timed out after "+d.String()+" waiting for "+what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

package main

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/pipelines/orders"
	"github.com/beamdedup/beamdedup/pipelines/streaming"
	"github.com/beamdedup/beamdedup/testing/kafkatest"
)

// kafkaNames are a test's own topics and group on the shared broker.
type kafkaNames struct {
	brokers, in, out, dlq, group string
}

func newKafkaNames(t *testing.T, b *kafkatest.Broker) kafkaNames {
	t.Helper()
	return kafkaNames{brokers: b.Addr, in: b.NewTopic(t, 2), out: b.NewTopic(t, 2), dlq: b.NewTopic(t, 1), group: "g-" + t.Name()}
}

func (n kafkaNames) flags() []string {
	return []string{"--pipeline=kafka", "--brokers=" + n.brokers, "--input_topic=" + n.in, "--output_topic=" + n.out,
		"--dead_letter_topic=" + n.dlq, "--group=" + n.group}
}

// produceOrders writes orders from..to-1 of seed 1 (every one priced
// under 100 twice) to the input topic and returns their distinct ids.
func (n kafkaNames) produceOrders(t *testing.T, from, to int) []string {
	t.Helper()
	rows := orders.Generate(to, 1)
	index := map[string]int{} // an order's place among the distinct orders
	for _, o := range rows {
		if _, ok := index[o.OrderID]; !ok {
			index[o.OrderID] = len(index)
		}
	}
	var ids []string
	var mine []orders.Order
	added := map[string]bool{}
	for _, o := range rows {
		if index[o.OrderID] < from {
			continue
		}
		mine = append(mine, o)
		if !added[o.OrderID] {
			added[o.OrderID] = true
			ids = append(ids, o.OrderID)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, streaming.ProduceOrders(ctx, n.brokers, n.in, mine))
	return ids
}

var kafkaReadLine = regexp.MustCompile(`records read +(\d+), (\d+) safe`)

// kafkaSummary is a Kafka run's records read and marked safe.
func kafkaSummary(t *testing.T, stdout string) (read, safe int) {
	t.Helper()
	m := kafkaReadLine.FindStringSubmatch(stdout)
	require.NotNil(t, m, stdout)
	read, _ = strconv.Atoi(m[1])
	safe, _ = strconv.Atoi(m[2])
	return read, safe
}

// With a cell per key (the default) and with state per bucket.
func TestRunKafkaDeduplicatesTheSeedsOrdersAndAccountsForEveryRecord(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags []string
	}{
		{"a cell per key", nil},
		{"state in 16 buckets", []string{"--state_buckets=16"}},
	} {
		t.Run(tc.name, func(t *testing.T) { runKafkaOnTheSeedsOrders(t, tc.flags...) })
	}
}

// runKafkaOnTheSeedsOrders runs the Kafka pipeline with flags on 500 of
// the seed's orders and checks that every record is accounted for and
// every order written once.
func runKafkaOnTheSeedsOrders(t *testing.T, flags ...string) {
	b := kafkatest.Shared(t)
	n := newKafkaNames(t, b)
	out := b.Count(t, n.out)
	code, stdout, _ := runJob(t, append(append(n.flags(), "--produce", "--count=500", "--idle_stop=2s"), flags...)...)
	require.Equal(t, 0, code, stdout)
	distinct := 500
	for _, want := range []string{
		"pipeline            kafka on prism",
		fmt.Sprintf("input               %s on %s (2 partitions), group %s;", n.in, b.Addr, n.group),
		"emitted             500\n",
		"dead-lettered       3\n",
		"(idle, every partition read to its end)",
	} {
		assert.Contains(t, stdout, want)
	}
	read, safe := kafkaSummary(t, stdout)
	assert.Equal(t, read, safe, "every record read is safe")
	assert.Regexp(t, `every record +\d+ = 500 emitted \+ \d+ duplicates dropped \+ 0 late \+ 3 dead-lettered`, stdout)
	assert.Regexp(t, `committed +partition 0 at (\d+) of (\d+), partition 1 at (\d+) of (\d+)`, stdout)
	for _, m := range regexp.MustCompile(`partition \d at (\d+) of (\d+)`).FindAllStringSubmatch(stdout, -1) {
		assert.Equal(t, m[2], m[1], "every offset committed")
	}
	waitFor(t, time.Minute, "every order on the output topic", func() bool { return out.Distinct() >= distinct })
	assert.Equal(t, distinct, out.Total(), "one record per order")
}

func TestRunKafkaWithATransactionalIDWritesEachOrderOnceInCommittedTransactions(t *testing.T) {
	b := kafkatest.Shared(t)
	n := newKafkaNames(t, b)
	out := b.Count(t, n.out) // read_committed
	code, stdout, _ := runJob(t, append(n.flags(), "--produce", "--count=200", "--idle_stop=2s", "--transactional_id=runjob-test")...)
	require.Equal(t, 0, code, stdout)
	waitFor(t, time.Minute, "every order on the output topic", func() bool { return out.Distinct() >= 200 })
	assert.Equal(t, 200, out.Total(), "one record per order")
	for _, r := range out.Records() {
		require.True(t, r.Attrs.IsTransactional(), "order %s written in a transaction", r.Key)
	}
}

func TestRunKafkaRejectsBadFlagsWithOneLineReason(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no brokers", []string{"--pipeline=kafka", "--brokers="}, "--pipeline=kafka needs --brokers (or $KAFKA_BROKERS)"},
		{"one topic twice", []string{"--pipeline=kafka", "--brokers=127.0.0.1:1", "--output_topic=orders_with_duplicates"}, "must be three topics"},
		{"a streaming flag", []string{"--pipeline=kafka", "--brokers=127.0.0.1:1", "--ack_deadline=5s"}, "--ack_deadline does not apply to --pipeline=kafka"},
		{"a kafka flag elsewhere", []string{"--group=g"}, "--group does not apply to --pipeline=orders; it applies to --pipeline=kafka"},
		{"negative idle stop", []string{"--pipeline=kafka", "--brokers=127.0.0.1:1", "--idle_stop=-1s"}, "--idle_stop must be >= 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runJob(t, tc.args...)
			assert.Equal(t, 2, code)
			assert.Empty(t, stdout)
			assert.Contains(t, stderr, tc.want)
			assert.Equal(t, 1, len(regexp.MustCompile("\n").FindAllString(stderr, -1)), "one line: %q", stderr)
		})
	}
}

func TestRunKafkaSaysInOneLineThatATopicDoesNotExist(t *testing.T) {
	b := kafkatest.Shared(t)
	n := newKafkaNames(t, b)
	n.out = "no-such-output"
	code, _, stderr := runJob(t, append(n.flags(), "--idle_stop=1s")...)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, fmt.Sprintf("kafka: topic no-such-output does not exist on %s", b.Addr))
}

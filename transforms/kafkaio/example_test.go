package kafkaio_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/beamdedup/beamdedup/testing/kafkatest"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/kafkaio"
)

// order is what the records of the orders topic hold, as JSON.
type order struct {
	OrderID  string  `json:"order_id"`
	Quantity int     `json:"quantity"`
	Price    float64 `json:"price"`
}

// decodeOrder keys a record by its order_id, or makes it a dead letter
// with the reason: a bad record never fails the job.
func decodeOrder(r kafkaio.Record, keyed func(string, kafkaio.Record), dead func(kafkaio.Record)) {
	var o order
	switch err := json.Unmarshal(r.Value, &o); {
	case err != nil:
		dead(r.DeadLetter("not JSON: " + err.Error()))
	case o.OrderID == "":
		dead(r.DeadLetter("no order_id"))
	default:
		keyed(o.OrderID, r)
	}
}

func init() {
	register.Function3x0(decodeOrder)
	register.Emitter2[string, kafkaio.Record]()
	register.Emitter1[kafkaio.Record]()
}

// Seed 001's pipeline: read a topic of orders, some sent twice, decode them
// (bad records to a dead-letter topic, with their reason), keep the first
// record of each order_id, write it, and commit the group's offsets of
// every record once it is safe: written, dead-lettered, or dropped as a
// duplicate.
func Example_keepFirstOrders() {
	brokers, in, out, dlq := exampleTopics() // a broker with the orders in topic in
	const group = "orders-dedup"

	p, s := beam.NewPipelineWithRoot()
	recs := kafkaio.Read(s, brokers, in, kafkaio.Group(group), kafkaio.IdleStop(2*time.Second))
	keyed, bad := beam.ParDo2(s, decodeOrder, recs) // KV<order_id, Record>, dead letters
	res := dedup.KeepFirst(s, keyed, dedup.UID("orders-dedup"), dedup.OutputDropped())
	written := kafkaio.Write(s, brokers, out, beam.DropKey(s, res.Rows), kafkaio.Transactional(group))
	deadWritten := kafkaio.Write(s, brokers, dlq, bad)
	kafkaio.Commit(s, brokers, group, written, res.Dropped, deadWritten)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pr, err := beamx.RunWithMetrics(ctx, p)
	if err != nil {
		fmt.Println("job failed:", err)
		return
	}
	c := kafkaio.ReadCounters(pr)
	fmt.Printf("read %d = written %d + dead-lettered %d + dropped %d\n", c.Read, c.Written, c.DeadLettered, c.Dropped)
	exampleReport(brokers, group, in, out, dlq)
	// Output:
	// read 13 = written 8 + dead-lettered 2 + dropped 3
	// orders_deduplicated: 8 records, 8 order_ids
	// orders_dlq: "no order_id", "not JSON: invalid character 'o' in literal null (expecting 'u')"
	// group orders-dedup committed at the end of each partition: true
}

// exampleTopics creates the example's topics, two partitions each, on the
// test binary's broker, and writes 13 records to the input: 8 orders, 3 of
// them sent twice, a record that is not JSON and one with no order_id.
func exampleTopics() (brokers, in, out, dlq string) {
	b, err := kafkatest.SharedBroker()
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	suffix := fmt.Sprintf("-%d", time.Now().UnixNano())
	in, out, dlq = "orders_with_duplicates"+suffix, "orders_deduplicated"+suffix, "orders_dlq"+suffix
	for _, t := range []string{in, out, dlq} {
		if err := b.CreateTopic(ctx, t, 2); err != nil {
			panic(err)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.DefaultProduceTopic(in))
	if err != nil {
		panic(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for i := range 8 {
		v := fmt.Sprintf(`{"order_id":"o%d","quantity":%d,"price":%d.50}`, i, 100+i, 10+i)
		recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "o%d", i), Value: []byte(v)})
		if i%3 == 0 { // o0, o3, o6 sent twice
			recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "o%d", i), Value: []byte(v)})
		}
	}
	recs = append(recs, &kgo.Record{Value: []byte("not json")}, &kgo.Record{Value: []byte(`{"quantity":1}`)})
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		panic(err)
	}
	return b.Addr, in, out, dlq
}

// exampleReport prints what the output topics hold and whether the group
// is committed to the end of each partition of the input.
func exampleReport(brokers, group, in, out, dlq string) {
	b, err := kafkatest.SharedBroker()
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	written, err := b.ReadAll(ctx, out)
	if err != nil {
		panic(err)
	}
	ids := map[string]bool{}
	for _, r := range written {
		ids[string(r.Key)] = true
	}
	fmt.Printf("orders_deduplicated: %d records, %d order_ids\n", len(written), len(ids))
	dead, err := b.ReadAll(ctx, dlq)
	if err != nil {
		panic(err)
	}
	var reasons []string
	for _, r := range dead {
		for _, h := range r.Headers {
			if h.Key == "dlq_reason" {
				reasons = append(reasons, fmt.Sprintf("%q", h.Value))
			}
		}
	}
	slices.Sort(reasons)
	fmt.Println("orders_dlq:", strings.Join(reasons, ", "))
	committed, err := b.Committed(ctx, group, in)
	if err != nil {
		panic(err)
	}
	end, err := b.EndOffsets(ctx, in)
	if err != nil {
		panic(err)
	}
	fmt.Printf("group %s committed at the end of each partition: %v\n", group, maps.Equal(committed, end))
}

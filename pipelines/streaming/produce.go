package streaming

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/beamdedup/beamdedup/pipelines/orders"
)

// ProduceOrders writes rows to topic on brokers as the seed's table holds
// them: each keyed by its order_id (so an order and its duplicate share a
// partition), its value the row as JSON, its timestamp created_at; and
// after them the values in undecodable, keyless. It returns once Kafka
// confirmed every record.
func ProduceOrders(ctx context.Context, brokers, topic string, rows []orders.Order, undecodable ...string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seedsOf(brokers)...), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	var first error
	fail := func(_ *kgo.Record, err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	for _, o := range rows {
		b, err := json.Marshal(o)
		if err != nil {
			return err
		}
		cl.Produce(ctx, &kgo.Record{Key: []byte(o.OrderID), Value: b, Timestamp: o.CreatedAt}, fail)
	}
	for _, u := range undecodable {
		cl.Produce(ctx, &kgo.Record{Value: []byte(u)}, fail)
	}
	if err := cl.Flush(ctx); err != nil {
		return fmt.Errorf("kafka: writing orders to %s on %s: %w", topic, brokers, err)
	}
	if first != nil {
		return fmt.Errorf("kafka: writing orders to %s on %s: %w", topic, brokers, first)
	}
	return nil
}

// CreateTopics creates those of topics that do not exist on brokers, with
// partitions partitions and one replica.
func CreateTopics(ctx context.Context, brokers string, partitions int, topics ...string) error {
	adm, closeAdm, err := admin(brokers)
	if err != nil {
		return err
	}
	defer closeAdm()
	for _, t := range topics {
		resp, err := adm.CreateTopic(ctx, int32(partitions), 1, nil, t)
		if err == nil {
			err = resp.Err
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("kafka: creating topic %s on %s: %w", t, brokers, err)
		}
	}
	return nil
}

package pubsubio_test

import (
	"context"
	"fmt"
	"time"

	pubsub "cloud.google.com/go/pubsub/v2/apiv1"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beamdedup/beamdedup/transforms/pubsubio"
)

// printFn prints a message's payload and passes the message on, to Ack.
func printFn(m pubsubio.Message, emit func(pubsubio.Message)) {
	fmt.Printf("%s\n", m.Data)
	emit(m)
}

func init() { register.Function2x0(printFn) }

// Read a subscription, print each message and ack it once printed. The
// Pub/Sub service is the one PUBSUB_EMULATOR_HOST names: in `go test` a
// fake the package's TestMain starts; by hand, `go run
// ./testing/pubsubtest/cmd/pstestserver --port=8085` and
// PUBSUB_EMULATOR_HOST=127.0.0.1:8085.
func ExampleRead() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const topic, sub = "projects/example/topics/orders", "projects/example/subscriptions/orders-sub"

	// A topic, a subscription and three messages on it.
	topics, err := pubsub.NewTopicAdminClient(ctx)
	if err != nil {
		panic(err)
	}
	defer topics.Close()
	subs, err := pubsub.NewSubscriptionAdminClient(ctx)
	if err != nil {
		panic(err)
	}
	defer subs.Close()
	if _, err := topics.CreateTopic(ctx, &pubsubpb.Topic{Name: topic}); err != nil {
		panic(err)
	}
	if _, err := subs.CreateSubscription(ctx, &pubsubpb.Subscription{Name: sub, Topic: topic, AckDeadlineSeconds: 10}); err != nil {
		panic(err)
	}
	var msgs []*pubsubpb.PubsubMessage
	for _, data := range []string{`{"order_id": "o-1"}`, `{"order_id": "o-2"}`, `{"order_id": "o-3"}`} {
		msgs = append(msgs, &pubsubpb.PubsubMessage{Data: []byte(data)})
	}
	if _, err := topics.Publish(ctx, &pubsubpb.PublishRequest{Topic: topic, Messages: msgs}); err != nil {
		panic(err)
	}

	// The pipeline: read until the subscription is quiet for 2s, print,
	// ack what was printed.
	p, s := beam.NewPipelineWithRoot()
	read := pubsubio.Read(s, sub, pubsubio.IdleStop(2*time.Second))
	printed := beam.ParDo(s, printFn, read)
	pubsubio.Ack(s, sub, printed)
	if _, err := beam.Run(ctx, "prism", p); err != nil {
		panic(err)
	}

	// Nothing is left to deliver: every message was acked.
	resp, err := subs.Pull(ctx, &pubsubpb.PullRequest{Subscription: sub, MaxMessages: 10, ReturnImmediately: true})
	if err != nil {
		panic(err)
	}
	fmt.Println("left on the subscription:", len(resp.GetReceivedMessages()))
	// Unordered output:
	// {"order_id": "o-1"}
	// {"order_id": "o-2"}
	// {"order_id": "o-3"}
	// left on the subscription: 0
}

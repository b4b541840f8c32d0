package pubsubadmin

import (
	"context"
	"fmt"
	"os"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Target describes the Pub/Sub service a client for endpoint (as for
// pubsubio.Endpoint; "" for the default) talks to: the emulator at
// endpoint, the one in PUBSUB_EMULATOR_HOST, or Google's Pub/Sub. The
// errors of pubsubio name the service with it; so do the programs'.
func Target(endpoint string) string {
	switch {
	case endpoint != "":
		return "emulator at " + endpoint
	case os.Getenv("PUBSUB_EMULATOR_HOST") != "":
		return "emulator at " + os.Getenv("PUBSUB_EMULATOR_HOST") + " (PUBSUB_EMULATOR_HOST)"
	}
	return "Google Cloud Pub/Sub (application default credentials)"
}

// CheckExists looks the subscription and topics up, so that a job does not
// start against a name that is not there. Only a definite answer fails: a
// missing name, or no server to ask. Without permission to read the
// metadata (roles/pubsub.subscriber and .publisher do not grant it) a name
// is taken on trust. endpoint is as for Subscriber ("": PUBSUB_EMULATOR_HOST
// or Google's Pub/Sub); the errors say which service was asked.
func CheckExists(ctx context.Context, endpoint, subscription string, topics ...string) error {
	sub, err := Subscriber(ctx, endpoint)
	if err != nil {
		return err
	}
	pub, err := Publisher(ctx, endpoint)
	if err != nil {
		return err
	}
	check := func(kind, name string, err error) error {
		switch status.Code(err) {
		case codes.OK, codes.PermissionDenied:
			return nil
		case codes.NotFound:
			return fmt.Errorf("%s %s does not exist on %s", kind, name, Target(endpoint))
		}
		return fmt.Errorf("looking up %s %s on %s: %v", kind, name, Target(endpoint), err)
	}
	_, err = sub.GetSubscription(ctx, &pubsubpb.GetSubscriptionRequest{Subscription: subscription})
	if err := check("subscription", subscription, err); err != nil {
		return err
	}
	for _, t := range topics {
		_, err := pub.GetTopic(ctx, &pubsubpb.GetTopicRequest{Topic: t})
		if err := check("topic", t, err); err != nil {
			return err
		}
	}
	return nil
}

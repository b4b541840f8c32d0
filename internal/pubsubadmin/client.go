// Package pubsubadmin is what pubsubio and the project's programs share of
// Pub/Sub's administration: the process's clients of an endpoint (an
// emulator, or Google's Pub/Sub), the service a client talks to (Target),
// the check that a job's subscription and topics exist (CheckExists), and
// the check of their full names (CheckName).
package pubsubadmin

import (
	"context"
	"fmt"
	"os"
	"sync"

	pubsub "cloud.google.com/go/pubsub/v2/apiv1"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Clients are safe for concurrent use and expensive to dial, so every DoFn
// instance in a worker process shares one per endpoint for the process's
// life.
var (
	clientsMu  sync.Mutex
	subClients = map[string]*pubsub.SubscriptionAdminClient{}
	pubClients = map[string]*pubsub.TopicAdminClient{}
)

func clientOptions(endpoint string) []option.ClientOption {
	if endpoint == "" {
		return nil // PUBSUB_EMULATOR_HOST or Google's endpoint, by the client's own rules
	}
	return []option.ClientOption{
		option.WithEndpoint(endpoint),
		option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
		option.WithTelemetryDisabled(),
	}
}

// cacheKey is the endpoint a client for endpoint really talks to: without
// an explicit endpoint that is whatever PUBSUB_EMULATOR_HOST says now, so a
// changed variable gets a new client rather than a stale one.
func cacheKey(endpoint string) string {
	if endpoint == "" {
		return "env:" + os.Getenv("PUBSUB_EMULATOR_HOST")
	}
	return endpoint
}

// Subscriber and Publisher are the process's clients for endpoint (as
// for pubsubio.Endpoint; "": PUBSUB_EMULATOR_HOST or Google's Pub/Sub),
// dialed the first time; the error names the service (Target).
func Subscriber(ctx context.Context, endpoint string) (*pubsub.SubscriptionAdminClient, error) {
	return cachedClient(ctx, subClients, endpoint, pubsub.NewSubscriptionAdminClient)
}

// Publisher is Subscriber's publisher client.
func Publisher(ctx context.Context, endpoint string) (*pubsub.TopicAdminClient, error) {
	return cachedClient(ctx, pubClients, endpoint, pubsub.NewTopicAdminClient)
}

func cachedClient[C any](ctx context.Context, cache map[string]C, endpoint string, dial func(context.Context, ...option.ClientOption) (C, error)) (C, error) {
	clientsMu.Lock()
	defer clientsMu.Unlock()
	key := cacheKey(endpoint)
	if c, ok := cache[key]; ok {
		return c, nil
	}
	c, err := dial(context.WithoutCancel(ctx), clientOptions(endpoint)...)
	if err != nil {
		var none C
		return none, fmt.Errorf("pubsubio: dialing %s: %w", Target(endpoint), err)
	}
	cache[key] = c
	return c, nil
}

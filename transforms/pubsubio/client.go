package pubsubio

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

// subscriberClient and publisherClient are the process's clients for
// endpoint, dialed the first time; the error names the service (Target).
func subscriberClient(ctx context.Context, endpoint string) (*pubsub.SubscriptionAdminClient, error) {
	return cachedClient(ctx, subClients, endpoint, pubsub.NewSubscriptionAdminClient)
}

func publisherClient(ctx context.Context, endpoint string) (*pubsub.TopicAdminClient, error) {
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

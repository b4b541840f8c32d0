// Package pubsubtest runs an in-memory Pub/Sub (the client library's pstest
// fake) for tests, benchmarks and demos, and creates topics and
// subscriptions on it.
//
// A Server lives in the calling process, so pipelines run on Prism in
// LOOPBACK mode (ptest, the demo) reach it through its Addr. It records every
// Acknowledge call and can be told to drop acks, which forces redeliveries.
// cmd/pstestserver serves the same fake as a standalone process for
// PUBSUB_EMULATOR_HOST.
package pubsubtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	pubsub "cloud.google.com/go/pubsub/v2/apiv1"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/emptypb"
)

// DefaultProject is the project of names created by a Server.
const DefaultProject = "test-project"

// Server is an in-process Pub/Sub fake.
type Server struct {
	*pstest.Server
	// Project is the project of the names the helpers create.
	Project string

	Topics *pubsub.TopicAdminClient
	Subs   *pubsub.SubscriptionAdminClient

	mu       sync.Mutex
	acks     []AckCall
	dropAcks func(ackID string) bool
}

// AckCall is one observed Acknowledge request.
type AckCall struct {
	Time         time.Time
	Subscription string
	AckIDs       []string
}

// Start starts a server on a free loopback port. minAckDeadline, when
// positive, lowers pstest's process-wide minimum ack deadline (10 s by
// default) so tests can use short leases.
func Start(ctx context.Context, minAckDeadline time.Duration) (*Server, error) {
	if minAckDeadline > 0 {
		pstest.SetMinAckDeadline(minAckDeadline)
	}
	return StartAt(ctx, "127.0.0.1:0")
}

// StartAt starts a server listening on addr (host:port).
func StartAt(ctx context.Context, addr string) (_ *Server, err error) {
	s := &Server{Project: DefaultProject}
	defer func() {
		if r := recover(); r != nil { // pstest panics when it cannot listen
			err = fmt.Errorf("pubsubtest: listen on %s: %v", addr, r)
		}
	}()
	s.Server = pstest.NewServerWithAddress(addr, pstest.ServerReactorOption{FuncName: "Acknowledge", Reactor: ackReactor{s}})
	opts := []option.ClientOption{
		option.WithEndpoint(s.Addr),
		option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
		option.WithTelemetryDisabled(),
	}
	if s.Topics, err = pubsub.NewTopicAdminClient(ctx, opts...); err != nil {
		s.Server.Close()
		return nil, err
	}
	if s.Subs, err = pubsub.NewSubscriptionAdminClient(ctx, opts...); err != nil {
		s.Topics.Close()
		s.Server.Close()
		return nil, err
	}
	registry.Store(s.Addr, s)
	return s, nil
}

// registry maps Addr to live servers, so DoFns running in the same process
// (Prism LOOPBACK) can inspect the fake.
var registry sync.Map

// Lookup returns the live in-process server listening on addr, or nil.
func Lookup(addr string) *Server {
	if v, ok := registry.Load(addr); ok {
		return v.(*Server)
	}
	return nil
}

// New starts a server for a test and closes it when the test ends.
func New(tb testing.TB, minAckDeadline time.Duration) *Server {
	tb.Helper()
	s, err := Start(context.Background(), minAckDeadline)
	if err != nil {
		tb.Fatalf("pubsubtest: %v", err)
	}
	tb.Cleanup(func() {
		if minAckDeadline > 0 {
			pstest.ResetMinAckDeadline()
		}
		s.Close()
	})
	return s
}

// Close stops the server and its clients.
func (s *Server) Close() error {
	registry.Delete(s.Addr)
	return errors.Join(s.Subs.Close(), s.Topics.Close(), s.Server.Close())
}

// TopicName returns the full name of topic id.
func (s *Server) TopicName(id string) string {
	return fmt.Sprintf("projects/%s/topics/%s", s.Project, id)
}

// SubscriptionName returns the full name of subscription id.
func (s *Server) SubscriptionName(id string) string {
	return fmt.Sprintf("projects/%s/subscriptions/%s", s.Project, id)
}

// CreateTopic creates topic id and returns its full name.
func (s *Server) CreateTopic(ctx context.Context, id string) (string, error) {
	name := s.TopicName(id)
	_, err := s.Topics.CreateTopic(ctx, &pubsubpb.Topic{Name: name})
	return name, err
}

// CreateSubscription creates subscription id on topic id with the given ack
// deadline (whole seconds) and returns its full name.
func (s *Server) CreateSubscription(ctx context.Context, topicID, id string, ackDeadline time.Duration) (string, error) {
	name := s.SubscriptionName(id)
	_, err := s.Subs.CreateSubscription(ctx, &pubsubpb.Subscription{
		Name:                     name,
		Topic:                    s.TopicName(topicID),
		AckDeadlineSeconds:       int32(ackDeadline / time.Second),
		MessageRetentionDuration: durationpb.New(24 * time.Hour),
	})
	return name, err
}

// MustTopic is CreateTopic failing tb on error.
func (s *Server) MustTopic(tb testing.TB, id string) string {
	tb.Helper()
	name, err := s.CreateTopic(context.Background(), id)
	if err != nil {
		tb.Fatalf("pubsubtest: create topic %s: %v", id, err)
	}
	return name
}

// MustSubscription is CreateSubscription failing tb on error.
func (s *Server) MustSubscription(tb testing.TB, topicID, id string, ackDeadline time.Duration) string {
	tb.Helper()
	name, err := s.CreateSubscription(context.Background(), topicID, id, ackDeadline)
	if err != nil {
		tb.Fatalf("pubsubtest: create subscription %s: %v", id, err)
	}
	return name
}

// PublishRaw publishes data to topic id directly into the fake (no RPC) and
// returns the message id.
func (s *Server) PublishRaw(topicID string, data []byte, attrs map[string]string) string {
	return s.Server.Publish(s.TopicName(topicID), data, attrs)
}

// MessagesOn returns the messages published to topic id, in publish order.
func (s *Server) MessagesOn(topicID string) []*pstest.Message {
	name := s.TopicName(topicID)
	var out []*pstest.Message
	for _, m := range s.Server.Messages() {
		if m.Topic == name {
			out = append(out, m)
		}
	}
	return out
}

// Unacked returns the ids of messages on topic id that were never acked.
func (s *Server) Unacked(topicID string) []string {
	var ids []string
	for _, m := range s.MessagesOn(topicID) {
		if m.Acks == 0 {
			ids = append(ids, m.ID)
		}
	}
	return ids
}

// AckCalls returns the Acknowledge requests seen so far (dropped ones too).
func (s *Server) AckCalls() []AckCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]AckCall(nil), s.acks...)
}

// DropAcks makes the server discard acks whose ack id satisfies drop (nil
// restores normal acking). A dropped ack leaves the message outstanding, so
// it is redelivered when its deadline expires: a lost ack.
//
// Ack ids of this fake are "<message id>:<delivery number>".
func (s *Server) DropAcks(drop func(ackID string) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropAcks = drop
}

// ackReactor observes each Acknowledge and filters dropped ids. pstest calls
// it with its server lock held, so it must not call back into the server.
type ackReactor struct{ s *Server }

func (r ackReactor) React(req any) (bool, any, error) {
	ar, ok := req.(*pubsubpb.AcknowledgeRequest)
	if !ok {
		return false, nil, nil
	}
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	r.s.acks = append(r.s.acks, AckCall{Time: time.Now(), Subscription: ar.Subscription, AckIDs: append([]string(nil), ar.AckIds...)})
	if r.s.dropAcks == nil {
		return false, nil, nil
	}
	kept := slices.DeleteFunc(slices.Clone(ar.AckIds), r.s.dropAcks)
	if len(kept) == 0 {
		return true, &emptypb.Empty{}, nil
	}
	ar.AckIds = kept // the real handler runs next with the kept ids
	return false, nil, nil
}

package pubsubtest

import (
	"context"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func pull(t *testing.T, s *Server, sub string) []*pubsubpb.ReceivedMessage {
	t.Helper()
	resp, err := s.Subs.Pull(context.Background(), &pubsubpb.PullRequest{Subscription: sub, MaxMessages: 10})
	require.NoError(t, err)
	return resp.GetReceivedMessages()
}

func TestDroppedAckLeadsToRedelivery(t *testing.T) {
	s := New(t, time.Second)
	s.MustTopic(t, "t")
	sub := s.MustSubscription(t, "t", "s", time.Second)
	id := s.PublishRaw("t", []byte("x"), nil)
	s.DropAcks(func(ackID string) bool { return strings.HasSuffix(ackID, ":1") })

	first := pull(t, s, sub)
	require.Len(t, first, 1)
	require.NoError(t, s.Subs.Acknowledge(context.Background(), &pubsubpb.AcknowledgeRequest{Subscription: sub, AckIds: []string{first[0].AckId}}))
	assert.Equal(t, []string{id}, s.Unacked("t"), "the dropped ack left the message outstanding")

	time.Sleep(1500 * time.Millisecond) // past the 1 s deadline
	again := pull(t, s, sub)
	require.Len(t, again, 1, "redelivered")
	require.NoError(t, s.Subs.Acknowledge(context.Background(), &pubsubpb.AcknowledgeRequest{Subscription: sub, AckIds: []string{again[0].AckId}}))
	assert.Empty(t, s.Unacked("t"))
	assert.Len(t, s.AckCalls(), 2, "both ack calls observed")
}

func TestLookupFindsLiveServersOnly(t *testing.T) {
	s, err := Start(context.Background(), 0)
	require.NoError(t, err)
	assert.Same(t, s, Lookup(s.Addr))
	require.NoError(t, s.Close())
	assert.Nil(t, Lookup(s.Addr))
}

func TestStartAtReportsAnAddressInUse(t *testing.T) {
	s := New(t, 0)
	_, err := StartAt(context.Background(), s.Addr)
	require.Error(t, err)
}

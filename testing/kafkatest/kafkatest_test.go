package kafkatest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

func produce(t *testing.T, addr, topic string, values ...string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, v := range values {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(v), Value: []byte(v)}).FirstErr())
	}
}

func TestSharedBrokerServesTopicsWithTwoPartitionsAndKeepsThemAcrossARestart(t *testing.T) {
	b := Shared(t)
	topic := b.NewTopic(t, 2)
	produce(t, b.Addr, topic, "a", "b", "c", "d", "e", "f")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	end, err := b.EndOffsets(ctx, topic)
	require.NoError(t, err)
	assert.Len(t, end, 2, "two partitions")
	assert.Equal(t, int64(6), end[0]+end[1])

	b.Kill()
	assert.False(t, b.Running())
	require.NoError(t, b.Restart(ctx))
	end, err = b.EndOffsets(ctx, topic)
	require.NoError(t, err)
	assert.Equal(t, int64(6), end[0]+end[1], "the records survive a kill and a restart")
	produce(t, b.Addr, topic, "g")
}

func TestTopicsAreNotCreatedOnFirstUse(t *testing.T) {
	b := Shared(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.UnknownTopicRetries(1))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = cl.ProduceSync(ctx, &kgo.Record{Topic: "no-such-topic", Value: []byte("x")}).FirstErr()
	require.Error(t, err, "a write to a missing topic fails instead of creating it")
}

// A broker whose random cluster id begins with '-' (one in 64) starts:
// the storage tool is given the id as --cluster-id=ID, which its parser
// does not take for an option.
func TestStartFormatsAStorageWhoseClusterIDBeginsWithADash(t *testing.T) {
	defer func(f func() string) { newClusterID = f }(newClusterID)
	newClusterID = func() string { return "-" + clusterID()[1:] }
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b, err := Start(ctx, Options{})
	require.NoError(t, err)
	defer b.Close()
	cl, err := b.Admin()
	require.NoError(t, err)
	md, err := cl.BrokerMetadata(ctx)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(md.Cluster, "-"), "the broker's cluster id: %q", md.Cluster)
}

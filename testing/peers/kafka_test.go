package peers_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/pipelines/orders"
	"github.com/beamdedup/beamdedup/pipelines/streaming"
	"github.com/beamdedup/beamdedup/testing/kafkatest"
	"github.com/beamdedup/beamdedup/testing/peers"
	"github.com/beamdedup/beamdedup/testing/prismtest"
)

func TestMain(m *testing.M) { prismtest.Main(m) }

// The smoke of cmd/kafkaversus's harness (the side by side itself runs
// only as that command): a peerdata file into a topic, our side into an
// output topic of its own, every order out once, and the run timed from
// its start to the broker's append of its last output record.
func TestOursOnKafkaWritesEveryOrderOnceTimedToItsLastOutputRecord(t *testing.T) {
	b := kafkatest.Shared(t)
	path := filepath.Join(t.TempDir(), "orders.jsonl")
	require.NoError(t, orders.WriteSample(path, 300, 1))
	rows, err := peers.ReadOrdersFile(path)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	in := b.NewTopic(t, 2)
	require.NoError(t, streaming.ProduceOrders(ctx, b.Addr, in, rows))
	out, dead := in+"-out", in+"-dead"
	require.NoError(t, peers.CreateOutputTopics(ctx, b.Addr, out, dead))

	got, err := peers.OursKafka(ctx, prismtest.Options(t, 2*time.Minute), b.Addr, in, out, dead, "smoke", len(rows), 300*time.Millisecond, peers.OursKafkaOptions{})
	require.NoError(t, err)
	assert.Equal(t, 300, got.Distinct)
	assert.Equal(t, 300, got.Out, "each order once")
	assert.Greater(t, got.Seconds, 0.0)
	assert.LessOrEqual(t, got.Seconds, got.Wall, "the last output record was appended before the job ended")
}

package pubsubio

import (
	"strconv"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/beamdedup/beamdedup/testing/pubsubtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWritePublishesEveryElementAndEmitsWhatItPublished(t *testing.T) {
	srv := pubsubtest.New(t, 0)
	out := srv.MustTopic(t, "out")
	var in []Message
	for i := range 120 {
		in = append(in, Message{Data: []byte(strconv.Itoa(i)), Attributes: map[string]string{"i": strconv.Itoa(i)}, AckID: "a" + strconv.Itoa(i)})
	}
	name := t.Name()
	c := newCollection(name)
	p, s := beam.NewPipelineWithRoot()
	published := Write(s, out, beam.CreateList(s, in), Endpoint(srv.Addr), publishBatch(50))
	beam.ParDo(s, &collectFn{Name: name}, published)
	pr, err := runPipeline(t, p, 60*time.Second)
	require.NoError(t, err)

	got := srv.MessagesOn("out")
	require.Len(t, got, 120)
	for _, m := range got {
		assert.Equal(t, string(m.Data), m.Attributes["i"])
	}
	acks := map[string]bool{}
	for _, m := range c.messages() {
		acks[m.AckID] = true
	}
	assert.Len(t, acks, 120, "every published message comes out, with its AckID")
	assert.Equal(t, int64(120), readCounters(pr).Published)
}

func TestTryWriteAndTryAckRejectBadArgumentsNamingEach(t *testing.T) {
	_, s := beam.NewPipelineWithRoot()
	_, err := TryWrite(s, "projects/p/subscriptions/t", beam.Create(s, "x"), publishBatch(0), AckDeadline(time.Minute), nil)
	require.Error(t, err)
	for _, w := range []string{"pubsubio.Write:", "not a full topic name (that names a subscription)",
		"needs a PCollection<pubsubio.Message>, got string", "publishBatch(0): want 1 to 1000",
		"AckDeadline does not apply to pubsubio.Write", "option 3 of 3 is nil"} {
		assert.Contains(t, err.Error(), w)
	}
	err = TryAck(s, "projects/p/topics/t", beam.Create(s, Message{}), Readers(2))
	require.Error(t, err)
	for _, w := range []string{"pubsubio.Ack:", "not a full subscription name (that names a topic)", "Readers does not apply to pubsubio.Ack"} {
		assert.Contains(t, err.Error(), w)
	}
}

func TestNativeBranchUsesBeamPubsubTransforms(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	msgs, err := ReadNative(s, "projects/p/subscriptions/s", IDAttribute("id"), TimestampAttribute("ts"))
	require.NoError(t, err)
	require.NoError(t, WriteNative(s, "projects/p/topics/t", msgs))
	_, err = ReadNative(s, "projects/p/subscriptions/s", IdleStop(time.Second))
	assert.ErrorContains(t, err, "IdleStop does not apply to pubsubio.ReadNative")

	edges, _, err := p.Build()
	require.NoError(t, err)
	var urns []string
	for _, e := range edges {
		if e.Payload != nil {
			urns = append(urns, e.Payload.URN)
		}
	}
	assert.Contains(t, urns, "beam:transform:pubsub_read:v1")
	assert.Contains(t, urns, "beam:transform:pubsub_write:v1")
}

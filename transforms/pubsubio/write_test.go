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

func TestWritePublishesEveryElementWithAttributes(t *testing.T) {
	srv := pubsubtest.New(t, 0)
	out := srv.MustTopic(t, "out")
	var in []Message
	for i := range 120 {
		in = append(in, Message{Data: []byte(strconv.Itoa(i)), Attributes: map[string]string{"i": strconv.Itoa(i)}})
	}
	p, s := beam.NewPipelineWithRoot()
	Write(s, out, beam.CreateList(s, in), WriteEndpoint(srv.Addr), PublishBatch(50))
	_, err := runPipeline(t, p, 60*time.Second)
	require.NoError(t, err)

	got := srv.MessagesOn("out")
	require.Len(t, got, 120)
	for _, m := range got {
		assert.Equal(t, string(m.Data), m.Attributes["i"])
	}
}

func TestTryWriteRejectsWrongElementType(t *testing.T) {
	_, s := beam.NewPipelineWithRoot()
	err := TryWrite(s, "projects/p/topics/t", beam.Create(s, "x"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "PCollection<pubsubio.Message>")
}

func TestNativeBranchUsesBeamPubsubTransforms(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	msgs, err := ReadNative(s, "projects/p/subscriptions/s", IDAttribute("id"), TimestampAttribute("ts"))
	require.NoError(t, err)
	require.NoError(t, WriteNative(s, "projects/p/topics/t", msgs))

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

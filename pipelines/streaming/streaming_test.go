package streaming

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/pipelines/orders"
	"github.com/beamdedup/beamdedup/testing/deduptest"
	"github.com/beamdedup/beamdedup/testing/prismtest"
	"github.com/beamdedup/beamdedup/testing/pubsubtest"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

func TestMain(m *testing.M) { prismtest.Main(m) } // splitting off: notes/beam-defects.md 9

func TestPipelineDeadLettersUndecodableMessagesWithTheReason(t *testing.T) {
	tests := []struct {
		name        string
		byMessageID bool
		wantOut     int
	}{
		// By order_id, the retry of o-1 is a duplicate.
		{name: "by order_id", wantOut: 2},
		// By message id, a publisher retry has a new id: only redeliveries collapse.
		{name: "by message id", byMessageID: true, wantOut: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := pubsubtest.New(t, 0)
			srv.MustTopic(t, "in")
			out := srv.MustTopic(t, "out")
			dlq := srv.MustTopic(t, "dlq")
			sub := srv.MustSubscription(t, "in", "in-sub", 10*time.Second)
			o1, _ := json.Marshal(orders.Order{OrderID: "o-1", Quantity: 1, Price: 5, CreatedAt: time.Unix(100, 0).UTC()})
			o2, _ := json.Marshal(orders.Order{OrderID: "o-2", Quantity: 2, Price: 500, CreatedAt: time.Unix(200, 0).UTC()})
			srv.PublishRaw("in", o1, nil)
			srv.PublishRaw("in", o2, nil)
			srv.PublishRaw("in", o1, map[string]string{"retry": "1"})
			srv.PublishRaw("in", []byte("{not json"), map[string]string{"k": "v"})
			srv.PublishRaw("in", []byte(`{"quantity": 1}`), nil)

			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			res, err := Run(ctx, prismtest.Job(t), PubSub{Subscription: sub, OutputTopic: out, DeadLetterTopic: dlq, Endpoint: srv.Addr,
				ByMessageID: tt.byMessageID}, RunConfig{Config: Config{Dedup: []dedup.Option{dedup.StateTTL(0)}}, IdleStop: time.Second})
			require.NoError(t, err)

			assert.Len(t, srv.MessagesOn("out"), tt.wantOut)
			dead := srv.MessagesOn("dlq")
			require.Len(t, dead, 2)
			reasons := map[string]string{}
			for _, m := range dead {
				reasons[string(m.Data)] = m.Attributes[DLQReason]
				assert.Equal(t, sub, m.Attributes[AttrSubscription])
				assert.NotEmpty(t, m.Attributes[AttrMessageID])
			}
			assert.Contains(t, reasons["{not json"], "invalid JSON")
			assert.Contains(t, reasons[`{"quantity": 1}`], "missing order_id")
			assert.Empty(t, srv.Unacked("in"), "dead letters acked once published")
			assert.Equal(t, dedup.Counters{RowsIn: 3, Emitted: int64(tt.wantOut), DuplicatesDropped: int64(3 - tt.wantOut)},
				deduptest.RowCounts(res.Dedup))
		})
	}
}

func TestBuildRejectsMissingNames(t *testing.T) {
	_, s := beam.NewPipelineWithRoot()
	_, err := Build(s, PubSub{OutputTopic: "projects/p/topics/t"}, Config{})
	require.Error(t, err)
	_, err = BuildFor[orders.Order](s, PubSub{Subscription: "projects/p/subscriptions/s", OutputTopic: "projects/p/topics/t"}, Config{})
	require.ErrorContains(t, err, "PartitionBy")
}

// A message KeepFirst refuses (here its kind column, the id attribute,
// holds no kind) is published as a dead letter with its own data and
// KeepFirst's reason, and acked once it is out, like one that does not
// decode.
func TestPipelineDeadLettersAndAcksTheMessagesKeepFirstRefuses(t *testing.T) {
	srv := pubsubtest.New(t, 0)
	srv.MustTopic(t, "in")
	out := srv.MustTopic(t, "out")
	dlq := srv.MustTopic(t, "dlq")
	sub := srv.MustSubscription(t, "in", "in-sub", 10*time.Second)
	o1, _ := json.Marshal(orders.Order{OrderID: "o-1", Quantity: 1, Price: 5, CreatedAt: time.Unix(100, 0).UTC()})
	o2, _ := json.Marshal(orders.Order{OrderID: "o-2", Quantity: 2, Price: 500, CreatedAt: time.Unix(200, 0).UTC()})
	srv.PublishRaw("in", o1, map[string]string{"kind": "+I"})
	srv.PublishRaw("in", o2, map[string]string{"kind": "no kind"})

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err := Run(ctx, prismtest.Job(t), PubSub{Subscription: sub, OutputTopic: out, DeadLetterTopic: dlq, Endpoint: srv.Addr, IDAttribute: "kind"},
		RunConfig{Config: Config{Dedup: []dedup.Option{dedup.StateTTL(0), rowspec.KindColumn("id")}}, IdleStop: time.Second})
	require.NoError(t, err)

	assert.Len(t, srv.MessagesOn("out"), 1)
	dead := srv.MessagesOn("dlq")
	require.Len(t, dead, 1)
	assert.Equal(t, string(o2), string(dead[0].Data), "the refused message's own data")
	assert.Contains(t, dead[0].Attributes[DLQReason], "kind")
	assert.NotEmpty(t, dead[0].Attributes[AttrMessageID])
	assert.Empty(t, srv.Unacked("in"), "the refused message acked once its dead letter is out")
}

package streaming

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamdedup/beamdedup/internal/iocounters"
	"github.com/beamdedup/beamdedup/internal/jobrun"
	"github.com/beamdedup/beamdedup/internal/pubsubadmin"
	"github.com/beamdedup/beamdedup/internal/unbounded"
	"github.com/beamdedup/beamdedup/transforms/pubsubio"
)

// PubSub is a Pub/Sub subscription: each message is acked once it is safe
// (pubsubio.Ack). Its names are full names (projects/P/subscriptions/S,
// projects/P/topics/T). On Dataflow (Native) the pipeline reads with Beam's
// io/pubsubio, which Dataflow runs natively and acks itself; elsewhere
// with transforms/pubsubio's Go-native source.
type PubSub struct {
	Subscription string
	OutputTopic  string
	// DeadLetterTopic receives undecodable messages. Empty: they are
	// counted, acked and dropped (Run needs one).
	DeadLetterTopic string
	// ByMessageID deduplicates by pubsubio.Message.ID, not by the row's
	// columns: the IDAttribute's value when set (publisher retries then
	// share a key), else Pub/Sub's message id (which only absorbs
	// redeliveries).
	ByMessageID bool
	// Native uses Beam's io/pubsubio (Dataflow only).
	Native bool
	// Endpoint is an emulator host:port for the Go-native source, sink and
	// acks; empty: PUBSUB_EMULATOR_HOST when set, else Google's Pub/Sub.
	Endpoint           string
	IDAttribute        string
	TimestampAttribute string
	// Readers is the number of concurrent readers (default 1).
	Readers int
	// Read adds options of the Go-native source (IdleStop, AckDeadline, ...).
	Read []pubsubio.Option
}

// DefaultPubSubStateTTL is how long KeepFirst remembers a key of a Pub/Sub
// stream (processing time) unless Config.Dedup says otherwise.
const DefaultPubSubStateTTL = 10 * time.Minute

// pubsubStallHint ends a stall message once the job's workers have
// reported: where the known cause is written down.
const pubsubStallHint = "unless a step of yours blocks, this is a known Prism defect, see notes/beam-defects.md (entry 8, \"A streaming job stalls\") and docs/streaming-reliability.md"

func (p PubSub) spec() spec {
	return spec{name: "streaming", uid: "streaming-dedup", stateTTL: DefaultPubSubStateTTL,
		output: p.OutputTopic, dead: p.DeadLetterTopic, input: p.Subscription, byID: p.ByMessageID,
		live: "Pub/Sub source", hint: pubsubStallHint,
		noun: "messages", write: "publish", written: "published", settled: "acked", settledVerb: "acked"}
}

func (p PubSub) check(running bool) error {
	if p.Subscription == "" || p.OutputTopic == "" {
		return errors.New("streaming: Subscription and OutputTopic are required")
	}
	if !running {
		return nil
	}
	for _, n := range []struct{ field, name, kind string }{
		{"Subscription", p.Subscription, pubsubadmin.Subscriptions},
		{"OutputTopic", p.OutputTopic, pubsubadmin.Topics},
		{"DeadLetterTopic", p.DeadLetterTopic, pubsubadmin.Topics},
	} {
		if n.name == "" {
			return fmt.Errorf("streaming: Run needs %s", n.field)
		}
		if err := pubsubadmin.CheckName(n.name, n.kind); err != nil {
			return err
		}
	}
	if p.Native {
		return errors.New("streaming: Run runs the Go-native source on Prism; Native is for Dataflow")
	}
	return nil
}

// attrs are the source options of the message attributes, which the
// native source takes too; conn those of the endpoint.
func (p PubSub) attrs() (attrs, conn []pubsubio.Option) {
	if p.IDAttribute != "" {
		attrs = append(attrs, pubsubio.IDAttribute(p.IDAttribute))
	}
	if p.TimestampAttribute != "" {
		attrs = append(attrs, pubsubio.TimestampAttribute(p.TimestampAttribute))
	}
	if p.Endpoint != "" {
		conn = append(conn, pubsubio.Endpoint(p.Endpoint))
	}
	return attrs, conn
}

func (p PubSub) read(s beam.Scope, ctl *unbounded.Control, idleStop time.Duration) (beam.PCollection, error) {
	attrs, conn := p.attrs()
	if p.Native {
		return pubsubio.ReadNative(s, p.Subscription, attrs...)
	}
	opts := append(append(append([]pubsubio.Option{}, p.Read...), attrs...), conn...)
	if p.Readers > 1 {
		opts = append(opts, pubsubio.Readers(p.Readers))
	}
	return pubsubio.TryRead(s, p.Subscription, append(opts, runOptions(ctl, idleStop, pubsubio.IdleStop)...)...)
}

func (p PubSub) write(s beam.Scope, topic string, col beam.PCollection) (beam.PCollection, error) {
	if p.Native {
		return beam.PCollection{}, pubsubio.WriteNative(s, topic, col)
	}
	_, conn := p.attrs()
	return pubsubio.TryWrite(s, topic, col, conn...)
}

// settle acks the messages; on Dataflow the native source has acked them
// already.
func (p PubSub) settle(s beam.Scope, written, dropped, dead beam.PCollection) error {
	if p.Native {
		return nil
	}
	_, conn := p.attrs()
	for _, col := range []beam.PCollection{written, beam.DropKey(s, dropped), dead} {
		if !col.IsValid() {
			continue
		}
		if err := pubsubio.TryAck(s, p.Subscription, col, conn...); err != nil {
			return err
		}
	}
	return nil
}

func (p PubSub) preflight(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := pubsubadmin.CheckExists(ctx, p.Endpoint, p.Subscription, p.OutputTopic, p.DeadLetterTopic); err != nil {
		return 0, fmt.Errorf("streaming: %w", err)
	}
	return max(p.Readers, 1), nil
}

func (PubSub) elements() elements[pubsubio.Message] { return elementsOf[pubsubio.Message]() }

func (PubSub) counts(pr beam.PipelineResult) counts {
	c := iocounters.ReadPubsub(pr)
	return counts{read: c.Read, settled: c.Acked + c.AckFailed, written: c.Published}
}

func (PubSub) finish(context.Context, *Result) error { return nil }

// explain ends the message of a stall of a step that waits on Pub/Sub
// with the service: the source pulls, the publish publishes and acks, and
// KeepFirst's stage acks the duplicates it drops.
func (p PubSub) explain(st *jobrun.Stall, inProcess, polling bool) {
	service := pubsubadmin.Target(p.Endpoint)
	if st.Stage.Always { // the source committed no bundle at all
		switch {
		case inProcess && polling:
			st.Hint = fmt.Sprintf("its reader waits on a Pull that Pub/Sub does not answer: check that the Pub/Sub service (%s) answers", service)
		case !inProcess:
			st.Hint += fmt.Sprintf("; or the Pub/Sub service (%s) does not answer", service)
		}
		return
	}
	switch st.Stage.Name {
	case stageName(stageSource, p.spec()):
		st.Hint = fmt.Sprintf("the source's bundle waits on Pub/Sub (%s) or on a step fused with it: check that the service answers, and that no step of yours blocks", service)
	case stageName(stageWrite, p.spec()):
		st.Hint = fmt.Sprintf("the publish and its acks wait on Pub/Sub (%s): check that the service answers", service)
	case stageName(stageDedup, p.spec()):
		st.Hint = fmt.Sprintf("KeepFirst's bundles ack the duplicates they drop on Pub/Sub (%s): check that the service answers; if it does, %s", service, pubsubStallHint)
	}
}

package streaming

import (
	"context"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamdedup/beamdedup/internal/jobrun"
	"github.com/beamdedup/beamdedup/internal/unbounded"
)

// Source is where the pipeline reads and writes: a Kafka topic with a
// consumer group (Kafka) or a Pub/Sub subscription (PubSub). E is its
// element, kafkaio.Record or pubsubio.Message. A source says how it reads,
// writes and settles its elements, and how a run of it is checked and
// watched.
type Source[E any] interface {
	// spec is what the pipeline needs to know of the source.
	spec() spec
	// elements are what the steps do with its elements (elementsOf[E]).
	elements() elements[E]
	// check refuses an incomplete source; running: for Run, which needs
	// a dead-letter topic and the Go-native source.
	check(running bool) error
	// read adds the source, its readers attached to ctl (nil: none) and
	// ending when idle for idleStop (0: reading on), and returns its
	// PCollection<E>.
	read(s beam.Scope, ctl *unbounded.Control, idleStop time.Duration) (beam.PCollection, error)
	// write writes col to topic and returns what was written (invalid
	// when the runner settles, as Dataflow's native IO does).
	write(s beam.Scope, topic string, col beam.PCollection) (beam.PCollection, error)
	// settle commits or acks the elements of written (E written to the
	// output), dropped (KV<[]byte, E>: duplicates KeepFirst dropped) and
	// dead (E dead letters written), each right after the step that made
	// them safe; nothing for an invalid collection.
	settle(s beam.Scope, written, dropped, dead beam.PCollection) error
	// preflight looks the source's topics or subscription up before a run
	// and returns how many readers the run has.
	preflight(ctx context.Context) (readers int, err error)
	// counts are the source's counters of a job.
	counts(pr beam.PipelineResult) counts
	// finish is what the source says after a run (Kafka: the group's
	// offsets) into res.
	finish(ctx context.Context, res *Result) error
	// explain ends the message of a stall of a step that waits on the
	// service; polling: a reader in this process waited on a poll the
	// service did not answer.
	explain(st *jobrun.Stall, inProcess, polling bool)
}

// spec is what the pipeline needs to know of a source.
type spec struct {
	name     string        // the scope, the prefix of errors, beamdedup/<name> the namespace of the pipeline's counters
	uid      string        // KeepFirst's UID by default
	stateTTL time.Duration // KeepFirst's StateTTL by default
	output   string        // the output topic
	dead     string        // the dead-letter topic; empty: dead letters are settled and dropped
	input    string        // what is read (a subscription, a topic), for dead letters
	byID     bool          // keyed by the element's id, not the row's columns
	live     string        // the live source, for the watchdog (jobrun.Sample.Live)
	hint     string        // what to check when the job stalls (jobrun.Options.Hint)
	// How the source names its elements ("records"), their writing
	// ("write", "written") and their settling ("safe", "committed").
	noun, write, written, settled, settledVerb string
}

// runOptions are the options of a source of type O (kafkaio.Option,
// pubsubio.Option) for Source.read's ctl and idleStop.
func runOptions[O any](ctl *unbounded.Control, idleStop time.Duration, idle func(time.Duration) O) []O {
	var opts []O
	if ctl != nil {
		opts = append(opts, unbounded.ControlOption[O](ctl))
	}
	if idleStop > 0 {
		opts = append(opts, idle(idleStop))
	}
	return opts
}

// counts are a source's counters of a job.
type counts struct {
	read, settled, written int64
}

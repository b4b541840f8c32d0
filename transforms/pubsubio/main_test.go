package pubsubio

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/beamdedup/beamdedup/internal/iocounters"
	"github.com/beamdedup/beamdedup/internal/jobrun"
	"github.com/beamdedup/beamdedup/internal/unbounded"
	"github.com/beamdedup/beamdedup/testing/prismtest"
	"github.com/beamdedup/beamdedup/testing/pubsubtest"
)

// TestMain serves a Pub/Sub fake at PUBSUB_EMULATOR_HOST for the Examples
// (the tests start fakes of their own) and runs the tests on Prism with
// splitting off (notes/beam-defects.md 9).
func TestMain(m *testing.M) {
	srv, err := pubsubtest.Start(context.Background(), 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("PUBSUB_EMULATOR_HOST", srv.Addr)
	prismtest.Main(m)
}

func init() {
	register.DoFn3x1[context.Context, Message, func(Message), error](&collectFn{})
	register.DoFn1x1[Message, error](&failFn{})
}

// readCounters are the package's counters of a job.
func readCounters(pr beam.PipelineResult) iocounters.Pubsub { return iocounters.ReadPubsub(pr) }

// newControl returns a Control of the readers of a Read (closed at the
// end of the test) and the option that attaches it.
func newControl(t *testing.T) (*unbounded.Control, Option) {
	ctl := unbounded.NewControl()
	t.Cleanup(func() { ctl.Close() })
	return ctl, unbounded.ControlOption[Option](ctl)
}

// runPipeline runs p as a job on the test runner with a deadline
// (internal/jobrun), so a source that never stops fails the test
// instead of hanging CI, and returns the run's error.
func runPipeline(t *testing.T, p *beam.Pipeline, timeout time.Duration) (beam.PipelineResult, error) {
	t.Helper()
	return jobrun.Run(context.Background(), p, prismtest.Options(t, timeout))
}

// collected holds what collectFn saw, per collector name; DoFns run in this
// process on Prism's LOOPBACK environment.
var collected sync.Map // name -> *collection

type collection struct {
	mu         sync.Mutex
	msgs       []Message
	ackedEarly []string // messages already acked when the pipeline saw them
	slept      bool
}

func newCollection(name string) *collection {
	c := &collection{}
	collected.Store(name, c)
	return c
}

func (c *collection) messages() []Message {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Message(nil), c.msgs...)
}

// collectFn records messages and passes them on (to Ack, in most tests).
// A message it sees has not reached Ack yet, so the fake must not have an
// ack for it.
type collectFn struct {
	Name         string
	Addr         string
	SleepFirstMs int64
}

func (f *collectFn) ProcessElement(_ context.Context, m Message, emit func(Message)) error {
	v, _ := collected.Load(f.Name)
	c := v.(*collection)
	if srv := pubsubtest.Lookup(f.Addr); srv != nil {
		if pm := srv.Message(m.MessageID); pm != nil && pm.Acks > 0 {
			c.mu.Lock()
			c.ackedEarly = append(c.ackedEarly, m.MessageID)
			c.mu.Unlock()
		}
	}
	c.mu.Lock()
	c.msgs = append(c.msgs, m)
	sleep := !c.slept && f.SleepFirstMs > 0
	c.slept = true
	c.mu.Unlock()
	if sleep {
		time.Sleep(time.Duration(f.SleepFirstMs) * time.Millisecond)
	}
	emit(m)
	return nil
}

// failFn fails its bundle, as a crashing worker would.
type failFn struct{}

func (*failFn) ProcessElement(m Message) error {
	return errors.New("failFn: simulated worker failure on " + m.MessageID)
}

package kafkaio

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/beamdedup/beamdedup/internal/jobrun"
	"github.com/beamdedup/beamdedup/internal/unbounded"
	"github.com/beamdedup/beamdedup/testing/kafkatest"
	"github.com/beamdedup/beamdedup/testing/prismtest"
	"github.com/beamdedup/beamdedup/transforms/internal/dofn"
)

var dofnVerify = dofn.Verify

// TestMain runs the tests on Prism with splitting off (notes/beam-defects.md
// 9); they share one broker (kafkatest.Shared).
func TestMain(m *testing.M) { prismtest.Main(m) }

func init() {
	register.DoFn3x0[context.Context, Record, func(Record)](&collectFn{})
}

// quiet is the IdleStop of the tests' jobs: their records are all
// written before the job starts.
const quiet = 500 * time.Millisecond

// readCounters are the package's counters of a job.
func readCounters(pr beam.PipelineResult) Counters { return ReadCounters(pr) }

// newControl returns a Control of the readers of a Read (closed at the
// end of the test) and the option that attaches it.
func newControl(t *testing.T) (*unbounded.Control, Option) {
	ctl := unbounded.NewControl()
	t.Cleanup(func() { ctl.Close() })
	return ctl, unbounded.ControlOption[Option](ctl)
}

// runPipeline runs p as a job on the test runner with a deadline.
func runPipeline(t *testing.T, p *beam.Pipeline, timeout time.Duration) (beam.PipelineResult, error) {
	t.Helper()
	return jobrun.Run(context.Background(), p, prismtest.Options(t, timeout))
}

// collected holds what collectFn saw, per collector name; DoFns run in this
// process on Prism's LOOPBACK environment.
var collected sync.Map // name -> *collection

type collection struct {
	mu   sync.Mutex
	recs []Record
	// drop: records of these partitions at or after these offsets are not
	// passed on (never marked safe).
	drop map[int32]int64
}

func newCollection(name string) *collection {
	c := &collection{}
	collected.Store(name, c)
	return c
}

func (c *collection) records() []Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Record(nil), c.recs...)
}

// collectFn records what it sees and passes it on (to Commit, in most
// tests), but the records its collection drops.
type collectFn struct{ Name string }

func (f *collectFn) ProcessElement(_ context.Context, r Record, emit func(Record)) {
	v, _ := collected.Load(f.Name)
	c := v.(*collection)
	c.mu.Lock()
	c.recs = append(c.recs, r)
	from, dropped := c.drop[r.Partition]
	c.mu.Unlock()
	if dropped && r.Offset >= from {
		return
	}
	emit(r)
}

// produce writes n records "k<i>"/"v<i>" to topic, each keyed, with a
// header and a timestamp of base + i seconds, and returns them as
// written (with partition and offset).
func produce(t *testing.T, b *kafkatest.Broker, topic string, from, n int, base time.Time) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var recs []*kgo.Record
	for i := from; i < from+n; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("v%d", i)),
			Headers: []kgo.RecordHeader{{Key: "i", Value: []byte(fmt.Sprint(i))}}, Timestamp: base.Add(time.Duration(i) * time.Second)})
	}
	require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())
	return recs
}

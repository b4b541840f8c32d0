package kafkaio

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/testing/kafkatest"
)

func init() {
	register.DoFn3x0[context.Context, Record, func(Record)](&aheadFn{})
}

// aheads records, per test, how far ahead of its partition's safe offset
// each record was read, at most.
var aheads sync.Map // name -> *maxAhead

type maxAhead struct {
	mu  sync.Mutex
	max int64
}

// aheadFn notes, for each record, its offset less its group's committed
// offset of its partition as its reader last read it, and passes the
// record on.
type aheadFn struct{ Name, Brokers, Group string }

func (f *aheadFn) ProcessElement(_ context.Context, r Record, emit func(Record)) {
	if v, ok := inFlights.Load(f.Brokers + "\x00" + f.Group + "\x00" + r.Topic); ok {
		in := v.(*inFlight)
		in.mu.Lock()
		from, ok := in.committed[r.Partition]
		if !ok {
			from = in.startedAt[r.Partition]
		}
		in.mu.Unlock()
		v, _ := aheads.Load(f.Name)
		m := v.(*maxAhead)
		m.mu.Lock()
		m.max = max(m.max, r.Offset-from)
		m.mu.Unlock()
	}
	emit(r)
}

// A reader reads at most MaxInFlight records ahead of its group's
// committed offset: at the bound it ends its bundle, so that what it
// emitted is made safe and committed, and it reads on. Every record is
// still read and committed.
func TestReadReadsAtMostMaxInFlightAheadOfWhatIsSafe(t *testing.T) {
	b := kafkatest.Shared(t)
	topic := b.NewTopic(t, 2)
	written := produce(t, b, topic, 0, 120, base)
	end := map[int32]int64{}
	for _, w := range written {
		end[w.Partition] = max(end[w.Partition], w.Offset+1)
	}
	const group, bound = "in-flight", 16
	m := &maxAhead{}
	aheads.Store(t.Name(), m)
	p, s := beam.NewPipelineWithRoot()
	recs := Read(s, b.Addr, topic, Group(group), IdleStop(quiet), MaxInFlight(bound))
	Commit(s, b.Addr, group, beam.ParDo(s, &aheadFn{Name: t.Name(), Brokers: b.Addr, Group: group}, recs))
	pr, err := runPipeline(t, p, 2*time.Minute)
	require.NoError(t, err)

	assert.Equal(t, int64(120), readCounters(pr).Read)
	m.mu.Lock()
	defer m.mu.Unlock()
	assert.Less(t, m.max, int64(bound), "no record read %d or more ahead of its group's committed offset", bound)
	assert.Greater(t, m.max, int64(bound/2), "the bound, not the bundles, held the readers")
	waitCommitted(t, b, group, topic, end)
}

// Where nothing becomes safe (here: records that never reach Commit), a
// reader held at the bound does not hang: after inFlightPatience it warns
// and reads on without the bound.
func TestAReaderHeldAtMaxInFlightWithNothingBecomingSafeReadsOn(t *testing.T) {
	defer func(d time.Duration) { inFlightPatience = d }(inFlightPatience)
	inFlightPatience = 500 * time.Millisecond
	b := kafkatest.Shared(t)
	topic := b.NewTopic(t, 2)
	produce(t, b, topic, 0, 40, base)
	const group = "in-flight-held"
	c := newCollection(t.Name())
	c.drop = map[int32]int64{0: 0, 1: 0} // nothing reaches Commit
	p, s := beam.NewPipelineWithRoot()
	recs := Read(s, b.Addr, topic, Group(group), IdleStop(quiet), MaxInFlight(10))
	Commit(s, b.Addr, group, beam.ParDo(s, &collectFn{Name: t.Name()}, recs))
	pr, err := runPipeline(t, p, 2*time.Minute)
	require.NoError(t, err)
	assert.Equal(t, int64(40), readCounters(pr).Read, "every record read once the bound was given up")
	assert.Zero(t, readCounters(pr).Safe)
}

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

// A bound given up (the group's offset did not move while a reader was
// held: its commits failed, say) holds again once the group's offset
// moves: the reader is again held at MaxInFlight records past it.
func TestInFlightBoundHoldsAgainOnceTheGroupsOffsetMoves(t *testing.T) {
	b := kafkatest.Shared(t)
	topic := b.NewTopic(t, 1)
	const group, bound = "bound-again", 10
	adm, err := b.Admin()
	require.NoError(t, err)
	ctx := context.Background()
	_, err = adm.CommitOffsets(ctx, group, offsetsOf(topic, map[int32]int64{0: 5}))
	require.NoError(t, err)
	f := &inFlight{adm: adm, group: group, topic: topic,
		committed: map[int32]int64{}, startedAt: map[int32]int64{0: 0}, moved: map[int32]time.Time{}, held: map[int32]time.Time{}}
	require.Equal(t, 0, f.room(ctx, 0, 15, bound), "held: 10 past the committed offset 5")
	f.mu.Lock()
	f.unbounded = true // given up
	f.read = time.Time{}
	f.mu.Unlock()
	assert.Equal(t, bound, f.room(ctx, 0, 15, bound), "the bound given up while the offset stays")

	_, err = adm.CommitOffsets(ctx, group, offsetsOf(topic, map[int32]int64{0: 8}))
	require.NoError(t, err)
	f.mu.Lock()
	f.read = time.Time{} // due for a refresh
	f.mu.Unlock()
	assert.Equal(t, 0, f.room(ctx, 0, 18, bound), "held again: 10 past the moved offset 8")
	assert.Equal(t, 3, f.room(ctx, 0, 15, bound), "7 past it: room for 3")
}

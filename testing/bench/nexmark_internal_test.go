package bench

import (
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beamdedup/beamdedup/pipelines/jsonl"
)

// GenerateNexmark adds the bids of the first events Nexmark events to the
// pipeline, each with its DateTime as its timestamp.
func GenerateNexmark(s beam.Scope, events int, seed uint64) beam.PCollection {
	s = s.Scope("Nexmark")
	return beam.ParDo(s, &nexmarkFn{Events: events, Seed: seed}, beam.Impulse(s))
}

// ReadNexmarkBids reads the bids of a JSON Lines file (testing/peers'
// WriteNexmarkBids, the file Flink SQL reads) with pipelines/jsonl.
func ReadNexmarkBids(s beam.Scope, path string) (beam.PCollection, error) {
	bids, _, err := jsonl.Read(s.Scope("Nexmark"), path, reflect.TypeFor[Bid]())
	return bids, err
}

type nexmarkFn struct {
	Events int
	Seed   uint64
}

func (f *nexmarkFn) ProcessElement(_ []byte, emit func(beam.EventTime, Bid)) {
	NexmarkBids(f.Events, f.Seed, func(b Bid) { emit(mtime.FromMilliseconds(b.DateTime), b) })
}

// PassBid is Nexmark q0, the pass-through.
func PassBid(b Bid) Bid { return b }

func init() {
	beam.RegisterType(reflect.TypeFor[Bid]())
	register.DoFn2x0[[]byte, func(beam.EventTime, Bid)](&nexmarkFn{})
	register.Emitter2[beam.EventTime, Bid]()
	register.Function1x1(PassBid)
}

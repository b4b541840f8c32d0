package streaming

import (
	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamdedup/beamdedup/transforms/dedup"
)

// keepFirst keeps the first message per key of kvs (KV<[]byte,
// pubsubio.Message>) and returns the kept KVs and the dropped ones (to be
// acked), or the zero PCollection when KeepFirst cannot return them.
func keepFirst(s beam.Scope, kvs beam.PCollection, opts []dedup.Option) (kept, dropped beam.PCollection, err error) {
	kept, err = dedup.TryKeepFirstPerKey(s, kvs, opts...)
	return kept, beam.PCollection{}, err
}

package orderstatus

import (
	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamdedup/beamdedup/transforms/dedup"
)

// keepLast is dedup.KeepLast by order_id in event time (ts), each output
// row's kind in op; opts come after these defaults. dead holds
// deadletter.DeadLetter.
func keepLast(s beam.Scope, events beam.PCollection, opts []dedup.Option) (changes, dead beam.PCollection, err error) {
	all := append([]dedup.Option{dedup.PartitionBy("order_id"), dedup.OnTime("ts"), dedup.OutputKind("op"), dedup.UID(UID)}, opts...)
	return dedup.TryKeepLastWithErrors(s, events, all...)
}

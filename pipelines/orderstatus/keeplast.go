package orderstatus

import (
	"fmt"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamdedup/beamdedup/pipelines/jsonl"
	"github.com/beamdedup/beamdedup/transforms/dedup"
)

// defaultKeepLast is dedup.KeepLast by order_id in event time (ts), each output
// row's kind in op; opts come after these defaults. A construction error
// is returned, not panicked.
func defaultKeepLast(s beam.Scope, events beam.PCollection, opts []dedup.Option) (changes, dead beam.PCollection, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	all := append([]dedup.Option{dedup.PartitionBy("order_id"), dedup.OnTime("ts"), dedup.OutputKind("op"), dedup.UID(UID)}, opts...)
	changes, rejected := dedup.KeepLastWithErrors(s, events, all...)
	return changes, jsonl.FromDedup(s, rejected), nil
}

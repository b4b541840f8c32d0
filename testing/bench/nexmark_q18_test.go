package bench_test

import (
	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamdedup/beamdedup/transforms/dedup"
)

// q18 is Nexmark's "find last bid": the last bid per (bidder, auction) by
// dateTime, Flink's ROW_NUMBER() ... ORDER BY dateTime DESC = 1, with a
// -U/+U pair for every later bid of a key.
func q18(opts ...dedup.Option) func(beam.Scope, beam.PCollection) beam.PCollection {
	return func(s beam.Scope, bids beam.PCollection) beam.PCollection {
		return dedup.KeepLast(s, bids, append([]dedup.Option{dedup.PartitionBy("bidder", "auction"),
			dedup.OnTime("date_time"), dedup.OutputKind("op")}, opts...)...)
	}
}

func init() {
	nexmarkCases = append(nexmarkCases,
		nexmarkCase{"q18_keeplast_bounded", q18()},
		nexmarkCase{"q18_keeplast_stateful", q18(dedup.ForceStateful())},
	)
}

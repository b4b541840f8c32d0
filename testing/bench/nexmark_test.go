package bench_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/testing/bench"
	"github.com/beamdedup/beamdedup/testing/rsstest"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

func TestNexmarkBidsFollowNexmarksProportionsAndSkew(t *testing.T) {
	const events = 100_000
	type pair struct{ bidder, auction int64 }
	var bids []bench.Bid
	n := bench.NexmarkBids(events, 1, func(b bench.Bid) { bids = append(bids, b) })
	require.Equal(t, len(bids), n)
	assert.Equal(t, events/50*46, n, "46 of every 50 events are bids")

	auctions, bidders, pairs := map[int64]int{}, map[int64]int{}, map[pair]int{}
	for i, b := range bids {
		auctions[b.Auction]++
		bidders[b.Bidder]++
		pairs[pair{b.Bidder, b.Auction}]++
		if i > 0 {
			assert.GreaterOrEqual(t, b.DateTime, bids[i-1].DateTime, "event time follows the event order")
		}
	}
	assert.Equal(t, int64(events/10), bids[n-1].DateTime-bench.BaseTime+1, "10,000 events a second")
	// The hot auction of a batch takes about half the bids, the hot bidder
	// about three quarters (Nexmark's hotAuctionRatio 2, hotBiddersRatio 4).
	hotAuction, hotBidder := 0, 0
	for _, b := range bids {
		if (b.Auction-1000)%100 == 0 {
			hotAuction++
		}
		if (b.Bidder-1000)%100 == 1 {
			hotBidder++
		}
	}
	assert.InDelta(t, 0.5, float64(hotAuction)/float64(n), 0.03)
	assert.InDelta(t, 0.75, float64(hotBidder)/float64(n), 0.03)
	t.Logf("%d bids over %d auctions, %d bidders, %d (bidder, auction) keys", n, len(auctions), len(bidders), len(pairs))
	assert.Less(t, len(pairs), n/2, "the skew makes most bids update an existing key")
}

// nexmarkCase is one query of BenchmarkNexmark over the same bids.
type nexmarkCase struct {
	name  string
	build func(s beam.Scope, bids beam.PCollection) beam.PCollection
}

var q0 = nexmarkCase{"q0_passthrough", func(s beam.Scope, bids beam.PCollection) beam.PCollection {
	return beam.ParDo(s, bench.PassBid, bids)
}}

// q18 is Nexmark's "find last bid": the last bid per (bidder, auction) by
// dateTime, Flink's ROW_NUMBER() ... ORDER BY dateTime DESC = 1, with a
// -U/+U pair for every later bid of a key.
func q18(opts ...dedup.Option) func(beam.Scope, beam.PCollection) beam.PCollection {
	return func(s beam.Scope, bids beam.PCollection) beam.PCollection {
		return dedup.KeepLast(s, bids, append([]dedup.Option{rowspec.PartitionBy("bidder", "auction"),
			rowspec.OnTime("date_time"), rowspec.KindColumn("op")}, opts...)...).Rows
	}
}

// nexmarkCases are q0 first (the others report their ratio to it), then
// q18 on each of KeepLast's expansions.
var nexmarkCases = []nexmarkCase{
	q0,
	{"q18_keeplast_bounded", q18()},
	{"q18_keeplast_stateful", q18(dedup.AsStream())},
}

// BenchmarkNexmark runs Nexmark q0 and q18 on the same generated events
// (BEAMDEDUP_NEXMARK_EVENTS, default 50,000) and reports events/s, counting
// every Nexmark event (persons and auctions too, as Nexmark does), and each
// query's ratio to q0 (x_q0; Flink's published q18/q0 is 0.35). With
// BEAMDEDUP_NEXMARK_FILE it reads the bids of that file instead (the one
// Flink SQL's Nexmark peer reads: `peerdata --kind=nexmark`), parsing each
// line as Flink SQL does, and reports bids/s.
//
//	go test -run='^$' -bench=Nexmark -benchtime=1x ./testing/bench/
//	BEAMDEDUP_NEXMARK_FILE=/tmp/peers/bids.jsonl go test -run='^$' -bench=Nexmark -benchtime=1x ./testing/bench/
func BenchmarkNexmark(b *testing.B) {
	events := envInt("BEAMDEDUP_NEXMARK_EVENTS", 50_000)
	file, unit := os.Getenv("BEAMDEDUP_NEXMARK_FILE"), "events/s"
	if file != "" {
		events, unit = countLines(b, file), "bids/s"
	}
	var q0Rate float64
	for _, c := range nexmarkCases {
		b.Run(c.name, func(b *testing.B) {
			var total time.Duration
			var requests int64              // Fn API state requests
			var counters dedup.LastCounters // q18 is a KeepLast
			for range b.N {
				p, s := beam.NewPipelineWithRoot()
				var bids beam.PCollection
				if file == "" {
					bids = bench.GenerateNexmark(s, events, 1)
				} else {
					var err error
					bids, err = bench.ReadNexmarkBids(s, file)
					require.NoError(b, err)
				}
				out := c.build(s.Scope(c.name), bids)
				bench.Sink(s, beam.Reshuffle(s.Scope("Shuffle"), out))
				rsstest.ResetPeak()
				bench.ResetStateRequests()
				pr, d := runOnPrism(b, p, 30*time.Minute)
				total += d
				require.Positive(b, bench.OutCount(pr), "output rows")
				for _, r := range bench.AllStateRequests() {
					requests += r.Total()
				}
				counters = dedup.ReadLastCounters(pr)
			}
			rate := float64(b.N*events) / total.Seconds()
			b.ReportMetric(rate, unit)
			b.ReportMetric(float64(requests)/float64(b.N*events), "requests/"+strings.TrimSuffix(unit, "s/s"))
			if counters.RowsIn > 0 {
				// Bids that reached the stateful step (the fold merges a
				// bundle's bids of a key before it).
				b.ReportMetric(float64(counters.RowsIn-counters.MiniBatchDropped)/float64(counters.RowsIn), "reaching/bid")
			}
			b.ReportMetric(load1(), "load1")
			if peak := rsstest.PeakMB(); peak > 0 {
				b.ReportMetric(peak, "peakRSS_MB")
			}
			if c.name == q0.name {
				q0Rate = rate
			} else if q0Rate > 0 {
				b.ReportMetric(rate/q0Rate, "x_q0")
			}
		})
	}
}

package bench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
)

// Nexmark's generator defaults (Beam's NexmarkConfiguration, which
// Flink's nexmark suite also uses), the ones that shape the bid stream of
// q0 and q18: of every 50 events, 1 is a new person, 3 are new auctions
// and 46 are bids; half the bids go to the current hot auction and three
// quarters come from the current hot bidder; the hot auction (bidder) is
// the first of the latest batch of 100 auctions (people); other bids pick
// one of the 100 in-flight auctions and one of the 1000 active people
// (with a lead of 10 ids). Events are 100 µs apart in event time (10,000
// events/s, firstEventRate). Person and auction events are generated and
// counted but not emitted: q0 and q18 read only bids.
const (
	NexmarkPersonProportion  = 1
	NexmarkAuctionProportion = 3
	NexmarkBidProportion     = 46
	nexmarkProportions       = NexmarkPersonProportion + NexmarkAuctionProportion + NexmarkBidProportion

	NexmarkHotAuctionRatio     = 2
	NexmarkHotBiddersRatio     = 4
	NexmarkNumInFlightAuctions = 100
	NexmarkNumActivePeople     = 1000
	nexmarkHotBatch            = 100 // HOT_AUCTION_RATIO and HOT_BIDDER_RATIO of the generator
	nexmarkIDLead              = 10  // AUCTION_ID_LEAD and PERSON_ID_LEAD
	nexmarkFirstID             = 1000
	NexmarkEventsPerSecond     = 10_000
)

// Bid is a Nexmark bid, with Nexmark's column names (as
// testing/peers writes them for Flink SQL). Op is not Nexmark's: it is the
// column q18 writes each output row's changelog kind into.
type Bid struct {
	Auction  int64  `json:"auction" beam:"auction"`
	Bidder   int64  `json:"bidder" beam:"bidder"`
	Price    int64  `json:"price" beam:"price"`
	Channel  string `json:"channel" beam:"channel"`
	URL      string `json:"url" beam:"url"`
	DateTime int64  `json:"date_time" beam:"date_time"` // event time, Unix ms
	Extra    string `json:"extra" beam:"extra"`
	Op       string `json:"op,omitempty" beam:"op"`
}

// NexmarkBids calls emit for every bid among the first events Nexmark
// events of seed, in event order, and returns how many it emitted.
func NexmarkBids(events int, seed uint64, emit func(Bid)) int {
	r := rand.New(rand.NewPCG(seed, 0x4e584d4b))
	n := 0
	for id := int64(0); id < int64(events); id++ {
		if id%nexmarkProportions < NexmarkPersonProportion+NexmarkAuctionProportion {
			continue // a person or an auction
		}
		auction := lastAuction(id)
		if r.IntN(NexmarkHotAuctionRatio) > 0 {
			auction = auction / nexmarkHotBatch * nexmarkHotBatch
		} else {
			lo := max(auction-NexmarkNumInFlightAuctions, 0)
			auction = lo + r.Int64N(auction-lo+1+nexmarkIDLead)
		}
		bidder := lastPerson(id)
		if r.IntN(NexmarkHotBiddersRatio) > 0 {
			bidder = bidder/nexmarkHotBatch*nexmarkHotBatch + 1
		} else {
			people := bidder + 1
			active := min(people, NexmarkNumActivePeople)
			bidder = people - active + r.Int64N(active+nexmarkIDLead)
		}
		ch := r.IntN(10_000)
		emit(Bid{
			Auction:  auction + nexmarkFirstID,
			Bidder:   bidder + nexmarkFirstID,
			Price:    int64(math.Round(math.Pow(10, r.Float64()*6) * 100)), // Nexmark's price: 10^[0,6) × 100
			Channel:  fmt.Sprintf("channel-%d", ch),
			URL:      fmt.Sprintf("https://www.nexmark.com/item.htm?query=1&channel_id=%d", ch),
			DateTime: BaseTime + id*1000/NexmarkEventsPerSecond,
			Extra:    strings.Repeat("x", r.IntN(20)),
		})
		n++
	}
	return n
}

// lastAuction is the base-0 id of the latest auction created by event id.
func lastAuction(id int64) int64 {
	epoch, off := id/nexmarkProportions, id%nexmarkProportions
	switch {
	case off < NexmarkPersonProportion:
		epoch--
		off = NexmarkAuctionProportion - 1
	case off >= NexmarkPersonProportion+NexmarkAuctionProportion:
		off = NexmarkAuctionProportion - 1
	default:
		off -= NexmarkPersonProportion
	}
	return max(epoch*NexmarkAuctionProportion+off, 0)
}

// lastPerson is the base-0 id of the latest person created by event id.
func lastPerson(id int64) int64 {
	epoch, off := id/nexmarkProportions, id%nexmarkProportions
	return epoch*NexmarkPersonProportion + min(off, NexmarkPersonProportion-1)
}

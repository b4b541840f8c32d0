package peers

import (
	"fmt"

	"github.com/beamdedup/beamdedup/pipelines/jsonl"
	"github.com/beamdedup/beamdedup/testing/bench"
)

// WriteNexmarkBids writes the bids among the first events Nexmark events
// of seed (testing/bench's generator, the one our Nexmark benchmark reads)
// to path as JSON Lines with Nexmark's column names, and returns how many.
func WriteNexmarkBids(path string, events int, seed uint64) (int, error) {
	var bids []bench.Bid
	bench.NexmarkBids(events, seed, func(b bench.Bid) { bids = append(bids, b) })
	if err := jsonl.WriteFile(path, bids); err != nil {
		return 0, fmt.Errorf("peers: writing %s: %w", path, err)
	}
	return len(bids), nil
}

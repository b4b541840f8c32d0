package peers

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/beamdedup/beamdedup/testing/bench"
)

// WriteNexmarkBids writes the bids among the first events Nexmark events
// of seed (testing/bench's generator, the one our Nexmark benchmark reads)
// to path as JSON Lines with Nexmark's column names, and returns how many.
func WriteNexmarkBids(path string, events int, seed uint64) (int, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return 0, err
	}
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	var werr error
	n := bench.NexmarkBids(events, seed, func(b bench.Bid) {
		if werr == nil {
			werr = enc.Encode(map[string]any{
				"auction": b.Auction, "bidder": b.Bidder, "price": b.Price, "channel": b.Channel,
				"url": b.URL, "date_time": b.DateTime, "extra": b.Extra,
			})
		}
	})
	if werr == nil {
		werr = w.Flush()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return 0, fmt.Errorf("peers: writing %s: %w", path, werr)
	}
	return n, nil
}

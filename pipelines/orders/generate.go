package orders

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/beamdedup/beamdedup/pipelines/jsonl"
)

// GenStart is the created_at of the first generated order; one order a
// second follows, like the article's faker source ('rows-per-second' = 1).
var GenStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// DuplicateBelow is the price under which the generator duplicates an order.
const DuplicateBelow = 100.0

// Generate returns count distinct orders and, for every order priced under
// DuplicateBelow, one exact duplicate, in a deterministic order for seed:
// a duplicate arrives after its original, at most three orders later, as
// the article's UNION ALL interleaves them.
func Generate(count int, seed uint64) []Order {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	out := make([]Order, 0, count+count/4)
	type pending struct {
		o     Order
		after int // emit once this many more originals have been emitted
	}
	var queue []pending
	for i := range count {
		o := Order{
			OrderID:   uuid(r),
			Quantity:  100 + r.Int64N(9900),              // 100..9999, as numberBetween '100','10000'
			Price:     float64(1000+r.IntN(49001)) / 100, // 10.00..500.00, two decimals
			CreatedAt: GenStart.Add(time.Duration(i) * time.Second),
		}
		out = append(out, o)
		rest := queue[:0]
		for _, p := range queue {
			if p.after == 0 {
				out = append(out, p.o)
				continue
			}
			p.after--
			rest = append(rest, p)
		}
		queue = rest
		if o.Price < DuplicateBelow {
			queue = append(queue, pending{o, r.IntN(3)})
		}
	}
	for _, p := range queue {
		out = append(out, p.o)
	}
	return out
}

// uuid returns a random version-4 UUID string drawn from r.
func uuid(r *rand.Rand) string {
	var b [16]byte
	for i := 0; i < 16; i += 8 {
		v := r.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// WriteSample writes Generate(count, seed) to path as JSON Lines, creating
// its directory.
func WriteSample(path string, count int, seed uint64) error {
	return jsonl.WriteFile(path, Generate(count, seed))
}

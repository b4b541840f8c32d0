package bench

import (
	"hash/fnv"
	"slices"
)

// A model of how a stateful dedup step's work spreads over parallel
// workers, given its keys: what a hot key does to a job's capacity. It is
// a simulation, not a run: the keys are real (a generator's), the costs are
// the ones the grid measures on Prism (docs/scaling.md says which), and the
// runners' assignment of keys to workers is modelled.

// SkewCost is what a row costs the worker that holds its key: CPU per row
// reaching the step, and per state request.
type SkewCost struct {
	RowMicros, RequestMicros float64
}

// SkewStep is the stateful step whose requests the model counts, per
// worker bundle (its cache: a key's later rows in a bundle read nothing).
type SkewStep struct {
	// Last: KeepLast, which appends a version (2 requests) for every row
	// that changes its key (every row here: the rows of a key differ);
	// else KeepFirst, which appends a mark only for a key never seen.
	Last bool
	// Fold: KeepLast's mini-batch fold, or KeepFirst's pre-filter: a key's
	// rows of a bundle reach the step once.
	Fold bool
	// Bundle is the rows of a worker's bundle (Flink's default
	// maxBundleSize is 1,000).
	Bundle int
}

// SkewResult is how one job's work spread over its workers.
type SkewResult struct {
	Workers int
	// HotRowShare is the largest share of a window's rows any one key
	// held, the worst window's.
	HotRowShare float64
	// KeyGroups is the effective parallelism with Flink's assignment of
	// keys to workers (key groups, fixed): total work ÷ the sum over
	// windows of the busiest worker's work. Workers for uniform keys; 1
	// for one key.
	KeyGroups float64
	// Balanced is the effective parallelism if the runner spread key
	// ranges perfectly (Dataflow rebalances ranges, but cannot split a
	// key): per window, the busiest worker does max(the hottest key's
	// work, the window's work ÷ Workers).
	Balanced float64
	// RequestsPerRow is the step's state requests per input row.
	RequestsPerRow float64
}

// flinkMaxParallelism is Flink's default number of key groups for up to
// 128 workers (KeyGroupRangeAssignment: max(128, 1.5 × parallelism rounded
// up to a power of two)).
func flinkMaxParallelism(workers int) int {
	n := 128
	for n < workers+workers/2 {
		n *= 2
	}
	return n
}

// SimulateSkew runs keys (in arrival order) through workers parallel
// workers of step, windows of window rows at a time, and returns how the
// work spread. Keys are hashed into Flink's key groups (FNV-1a here; Flink
// uses murmur: the spread is what matters), a key group to a worker by
// Flink's range assignment; each worker cuts its rows into bundles.
func SimulateSkew(keys []string, workers int, step SkewStep, cost SkewCost, window int) SkewResult {
	groups := flinkMaxParallelism(workers)
	workerOf := func(k string) int {
		h := fnv.New64a()
		h.Write([]byte(k))
		return int(h.Sum64()%uint64(groups)) * workers / groups
	}
	seen := map[string]bool{}                    // keys whose state exists
	inBundle := make([]map[string]bool, workers) // each worker's open bundle
	bundleRows := make([]int, workers)
	for w := range inBundle {
		inBundle[w] = map[string]bool{}
	}
	var total, keyGroupsSum, balancedSum float64
	var requests int64
	res := SkewResult{Workers: workers}
	for start := 0; start < len(keys); start += window {
		work := make([]float64, workers)
		keyWork := map[string]float64{}
		keyRows := map[string]int{}
		end := min(start+window, len(keys))
		for _, k := range keys[start:end] {
			w := workerOf(k)
			keyRows[k]++
			var n int64 // this row's requests
			first := !inBundle[w][k]
			if first {
				inBundle[w][k] = true
				n++ // the get
			}
			switch {
			case step.Last && (first || !step.Fold):
				n += 2 // a version (with the fold, one per key and bundle)
			case !step.Last && !seen[k]:
				n++ // a mark for a new key
			}
			seen[k] = true
			c := cost.RequestMicros * float64(n)
			if first || !step.Fold {
				c += cost.RowMicros // a folded row never reaches the step
			}
			work[w] += c
			keyWork[k] += c
			requests += n
			if bundleRows[w]++; bundleRows[w] == step.Bundle {
				clear(inBundle[w])
				bundleRows[w] = 0
			}
		}
		var sum, hotKey float64
		for _, c := range work {
			sum += c
		}
		for _, c := range keyWork {
			hotKey = max(hotKey, c)
		}
		for _, n := range keyRows {
			res.HotRowShare = max(res.HotRowShare, float64(n)/float64(end-start))
		}
		total += sum
		keyGroupsSum += slices.Max(work)
		balancedSum += max(hotKey, sum/float64(workers))
	}
	res.KeyGroups = total / keyGroupsSum
	res.Balanced = total / balancedSum
	res.RequestsPerRow = float64(requests) / float64(len(keys))
	return res
}

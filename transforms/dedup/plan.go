package dedup

import (
	"fmt"

	"github.com/beamdedup/beamdedup/transforms/dedup/internal/core"
	"github.com/beamdedup/beamdedup/transforms/dedup/internal/step"
)

// The plan step: which expansion a transform of the family builds, decided
// once, from its options and its input, before anything is built. The rest
// of the construction follows the plan without deciding again.

// expansion is the shape of a transform's pipeline.
type expansion uint8

const (
	// statefulExpansion: per-key state in a stateful DoFn (step.Step),
	// output at once; the expansion a stream needs.
	statefulExpansion expansion = iota
	// mergeExpansion: bounded input, a merge of each key's rows
	// (expand.go): a lifted combine, or an in-bundle merge and a
	// GroupByKey.
	mergeExpansion
	// windowExpansion: window dedup, a combine per key and window
	// (expand.go, window.go).
	windowExpansion
)

var expansionNames = [...]string{"stateful", "merge", "window"}

func (e expansion) String() string { return expansionNames[e] }

// input is what the plan needs to know of a transform's input.
type input struct {
	bounded       bool
	globalWindows bool
	// perKey: a KV input, keyed already; its keying step neither
	// pre-filters nor folds.
	perKey bool
	// floatKey: perKey with a float key, which Beam Go's lifted combine
	// cannot hash ("Unexpected coder for hashing: double",
	// notes/beam-defects.md 7).
	floatKey bool
}

// plan is how a transform expands.
type plan struct {
	expansion expansion
	// rules are the decisions the expansion applies: KeepFirst's or
	// KeepLast's (Last), with their options.
	rules core.Config
	last  bool
	// dir is which row per key a merge keeps.
	dir core.Direction

	// stateful: how state is kept (marks or versions, statecoder) and the
	// one timer family of the DoFn (Beam Go 2.77 hangs a DoFn with two).
	layout layout
	family core.Family
	// stateful: how the step issues its state requests (step.OverlapMode): a
	// batch's reads together where no timer is set and the window is
	// global, else only the writes not waited for.
	overlap step.OverlapMode
	// stateful: how many key-hash buckets the state is kept in (rows
	// batched per bucket before the shuffle, a cell per bucket: step's
	// buckets.go); 0 keeps a cell per key.
	buckets int
	// stateful: the keying step drops in-bundle duplicates before the
	// shuffle (KeepFirst's pre-filter) or folds each key's rows of a
	// bundle to the one that decides its state (KeepLast's fold). Both
	// need globally windowed input for the fold (its FinishBundle output
	// lands in the global window) and no EventTimeTTL (whose expiry
	// depends on every row's event time).
	preFilter, fold bool

	// merge: each key's rows are merged within the bundle and grouped
	// with a GroupByKey, rather than combined by a lifted combine (needs
	// global windows, as the fold).
	localMerge bool
	// merge, window: a GroupByKey and a merge of each key's rows rather
	// than a combine, which keeps only the winner: with localMerge, or
	// to output the rows dropped (OutputDropped).
	grouped bool
	// merge: with localMerge on struct rows, the in-bundle merge's
	// candidates cross the shuffle batched per key-hash bucket
	// (step.Bucket), not one element per key and bundle. A KV input's
	// keys would need decoding after the shuffle; it keeps the per-key
	// GroupByKey.
	bucketed bool
	// dropped: the steps emit the rows they drop (OutputDropped).
	dropped bool
}

// layout is how a stateful step keeps a key's state (internal/statecoder).
type layout uint8

const (
	// marks: a bag of int64 marks, for KeepFirst's watermarkless state
	// (a seen marker and its retention): a new key is one append.
	marks layout = iota
	// versions: a bag of encoded states, for state that holds a row
	// (KeepLast's last row, event-time KeepFirst's candidate): a change is
	// one append of the new version.
	versions
)

// defaultStateBuckets is how many key-hash buckets the stateful expansion
// keeps bounded input's state in (AsStream, EventTimeTTL), which StateBuckets
// overrides. Bounded input comes in large bundles on every runner (all of a
// key's rows in one on a batch runner, whose bundle per key it spares), so a
// bucket read once serves many rows; the count bounds a batch runner's
// parallelism for the step (docs/state.md).
const defaultStateBuckets = 128

// maxStateBuckets bounds StateBuckets: past it a bucket serves too few rows
// of a bundle to pay for its read.
const maxStateBuckets = 1 << 16

// stateBuckets is how many buckets the stateful expansion keeps its state
// in: StateBuckets's, else the default on bounded input; 0 keeps a cell per
// key (windowed input always does).
func stateBuckets(c *config, in input) (int, error) {
	bucketable := in.globalWindows
	if !c.bucketsSet {
		if in.bounded && bucketable {
			return defaultStateBuckets, nil
		}
		return 0, nil
	}
	switch {
	case c.buckets == 0:
		return 0, nil
	case !in.globalWindows:
		return 0, fmt.Errorf("StateBuckets(%d): windowed input keeps a cell per key and window; drop the option", c.buckets)
	}
	return c.buckets, nil
}

// newPlan decides how the transform c describes expands on in.
func newPlan(c *config, in input) (plan, error) {
	last := c.transform == keepLast
	p := plan{last: last, dir: c.dir(), dropped: c.dropped}
	inBundle := !c.noMiniBatch && in.globalWindows
	switch {
	case c.transform.window():
		p.expansion = windowExpansion
		p.grouped = c.dropped
	case in.bounded && !c.asStream && c.eventTTL == 0 && !(in.floatKey && !inBundle && !c.dropped):
		// On bounded input a key's first or last row is a plain minimum or
		// maximum: no per-row state access. Event-time retention splits a
		// key's rows into periods, which one merge cannot express.
		p.expansion = mergeExpansion
		p.localMerge = inBundle
		p.grouped = inBundle || c.dropped
		p.bucketed = inBundle && !in.perKey && !c.hooks.PerKeyMerge
	default:
		p.expansion = statefulExpansion
	}
	if !last && c.sequenceBy != "" && p.expansion == statefulExpansion {
		// KeepFirst's smallest SequenceBy value is known only once a key's
		// rows are all seen, which a merge does and a stream does not.
		if !in.bounded {
			return plan{}, fmt.Errorf("SequenceBy(%q) needs all of a key's rows before the first is known, which a stream never has; use OnTime(%q) for the event-time first row (emitted when the watermark passes it), or window dedup", c.sequenceBy, c.sequenceBy)
		}
		return plan{}, fmt.Errorf("SequenceBy(%q) is only supported by KeepFirst's bounded expansion, which AsStream and EventTimeTTL turn off", c.sequenceBy)
	}
	if p.expansion != statefulExpansion {
		return p, nil
	}
	var err error
	p.rules = core.Config{
		// KeepLast's output is immediate, never held for the watermark:
		// OnTime only orders its rows.
		EventTime:        c.onTime != "" && !last,
		StateTTL:         c.stateTTL.Milliseconds(),
		EventTTL:         c.eventTTL.Milliseconds(),
		ResetOnDuplicate: c.resetOnDup,
		// On bounded input state ends with the input; a processing-time
		// cleanup timer would only keep the job alive until it fires.
		CleanupTimers:   !in.bounded && !c.noCleanup,
		Ordered:         last && c.ordered(),
		Upsert:          c.upsert,
		RetractOnExpiry: c.retract,
	}
	p.family = p.rules.Family()
	if p.buckets, err = stateBuckets(c, in); err != nil {
		return plan{}, err
	}
	switch {
	case c.noOverlap:
		p.overlap = step.WaitEach
	case p.buckets > 0:
		// A bucket's rows are decided as their batch arrives; its writes
		// wait for the bundle's end.
		p.overlap = step.OverlapWrites
	case p.family == core.NoFamily && in.globalWindows:
		p.overlap = step.OverlapBatch
	default:
		p.overlap = step.OverlapWrites
	}
	if last || p.rules.EventTime {
		p.layout = versions
	}
	keyedHere := !in.perKey && c.eventTTL == 0
	p.preFilter = keyedHere && !last && !c.noMiniBatch
	p.fold = keyedHere && last && inBundle
	return p, nil
}

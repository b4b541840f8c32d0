package dedup

import (
	"context"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamdedup/beamdedup/transforms/dedup/core"
	"github.com/beamdedup/beamdedup/transforms/internal/metricsum"
	"github.com/beamdedup/beamdedup/transforms/rowkind"
)

// Namespace is the Beam metrics namespace of every counter of this package.
const Namespace = "beamdedup"

// Counter names. Every input row of KeepFirst (and of window dedup) lands
// in exactly one of Emitted, DuplicatesDropped, LateDropped,
// CandidatesReplaced, ChangelogSwallowed, RetractionsIgnored and
// DeadLettered, or is still a pending candidate: RowsIn = the sum of those
// + pending (Counters.Pending).
const (
	MetricRowsIn             = "rows_in"
	MetricEmitted            = "emitted"
	MetricDuplicatesDropped  = "duplicates_dropped"
	MetricLateDropped        = "late_dropped"
	MetricCandidatesReplaced = "candidates_replaced"
	MetricChangelogSwallowed = "changelog_swallowed"
	MetricRetractionsIgnored = "retractions_ignored"
	MetricKeysExpired        = "keys_expired"
	MetricDeadLettered       = "dead_lettered"
	MetricTTLRefreshes       = "ttl_refreshes"
	// MetricMiniBatchDropped counts the part of DuplicatesDropped (KeepFirst)
	// or Superseded (KeepLast's fold) that the mini-batch dropped before the
	// keyed step.
	MetricMiniBatchDropped = "minibatch_dropped"
)

// The stateful step's cost: reads of a key's state and writes of a change
// (SDK calls), the Fn API state requests they made, by kind (state.go has
// the requests per call), the reads a bundle's cache spared (a key read or
// written earlier in the same bundle), and timers set.
const (
	MetricStateReads     = "state_reads"
	MetricStateWrites    = "state_writes"
	MetricStateGets      = "state_gets"
	MetricStateAppends   = "state_appends"
	MetricStateClears    = "state_clears"
	MetricStateCacheHits = "state_cache_hits"
	MetricTimerSets      = "timer_sets"
)

// KeepLast's counters. Every input row of KeepLast lands in exactly one of
// Inserts, Updates, DeletesIn, DuplicatesDropped, OutOfOrderDropped,
// RetractionsIgnored, DeadLettered and Superseded (see
// Counters.LastUnaccounted). The Emitted* counters count output rows by
// kind (+I rows are Inserts).
const (
	MetricInserts             = "inserts"               // rows that became a key's first row (+I)
	MetricUpdates             = "updates"               // rows that replaced a key's stored row
	MetricDeletesIn           = "deletes_in"            // -U/-D rows that deleted a key's stored row
	MetricOutOfOrderDropped   = "out_of_order_dropped"  // ordered rows below the stored value
	MetricSuperseded          = "superseded"            // rows merged away before the state (bounded input, mini-batch fold)
	MetricEmittedUpdateBefore = "emitted_update_before" // -U rows emitted
	MetricEmittedUpdateAfter  = "emitted_update_after"  // +U rows emitted
	MetricEmittedDelete       = "emitted_delete"        // -D rows emitted
)

// outcomeMetrics names the counter of each outcome; "" is not counted
// (a candidate is counted once it is emitted or replaced).
var outcomeMetrics = [core.NumOutcomes]string{
	core.Emit:             MetricEmitted,
	core.BecomeCandidate:  "",
	core.ReplaceCandidate: MetricCandidatesReplaced,
	core.DropDuplicate:    MetricDuplicatesDropped,
	core.DropLate:         MetricLateDropped,
	core.Swallow:          MetricChangelogSwallowed,
	core.IgnoreRetraction: MetricRetractionsIgnored,
	core.Inserted:         MetricInserts,
	core.Updated:          MetricUpdates,
	core.DeletedIn:        MetricDeletesIn,
	core.OutOfOrder:       MetricOutOfOrderDropped,
	core.Superseded:       MetricSuperseded,
}

// Counters are the totals of this package's counters over all steps of a
// pipeline run.
type Counters struct {
	RowsIn, Emitted, DuplicatesDropped, LateDropped, CandidatesReplaced,
	ChangelogSwallowed, RetractionsIgnored, KeysExpired, DeadLettered,
	TTLRefreshes, MiniBatchDropped int64
	// The stateful step's cost.
	StateReads, StateWrites, StateGets, StateAppends, StateClears, StateCacheHits, TimerSets int64
	// KeepLast.
	Inserts, Updates, DeletesIn, OutOfOrderDropped, Superseded,
	EmittedUpdateBefore, EmittedUpdateAfter, EmittedDelete int64
}

// LastUnaccounted is the number of KeepLast input rows in no outcome
// counter; it is 0 after any run (KeepLast holds no row back).
func (c Counters) LastUnaccounted() int64 {
	return c.RowsIn - c.Inserts - c.Updates - c.DeletesIn - c.DuplicatesDropped - c.OutOfOrderDropped -
		c.RetractionsIgnored - c.DeadLettered - c.Superseded
}

// LastEmitted is the number of KeepLast output rows by the counters: +I,
// -U, +U and -D rows.
func (c Counters) LastEmitted() int64 {
	return c.Inserts + c.EmittedUpdateBefore + c.EmittedUpdateAfter + c.EmittedDelete
}

// Pending is the number of input rows not yet accounted for: candidates
// still waiting for the watermark. It is 0 after a bounded run.
func (c Counters) Pending() int64 {
	return c.RowsIn - c.Emitted - c.DuplicatesDropped - c.LateDropped - c.CandidatesReplaced -
		c.ChangelogSwallowed - c.RetractionsIgnored - c.DeadLettered
}

// ReadCounters sums this package's counters from a pipeline result.
func ReadCounters(pr beam.PipelineResult) Counters {
	var c Counters
	metricsum.Sum(pr, Namespace, c.fields())
	return c
}

// fields maps each counter's name to its field of c.
func (c *Counters) fields() map[string]*int64 {
	return map[string]*int64{
		MetricRowsIn: &c.RowsIn, MetricEmitted: &c.Emitted, MetricDuplicatesDropped: &c.DuplicatesDropped,
		MetricLateDropped: &c.LateDropped, MetricCandidatesReplaced: &c.CandidatesReplaced,
		MetricChangelogSwallowed: &c.ChangelogSwallowed, MetricRetractionsIgnored: &c.RetractionsIgnored,
		MetricKeysExpired: &c.KeysExpired, MetricDeadLettered: &c.DeadLettered, MetricTTLRefreshes: &c.TTLRefreshes,
		MetricMiniBatchDropped: &c.MiniBatchDropped,
		MetricStateReads:       &c.StateReads, MetricStateWrites: &c.StateWrites, MetricStateGets: &c.StateGets,
		MetricStateAppends: &c.StateAppends, MetricStateClears: &c.StateClears, MetricStateCacheHits: &c.StateCacheHits,
		MetricTimerSets: &c.TimerSets,
		MetricInserts:   &c.Inserts, MetricUpdates: &c.Updates, MetricDeletesIn: &c.DeletesIn,
		MetricOutOfOrderDropped: &c.OutOfOrderDropped, MetricSuperseded: &c.Superseded,
		MetricEmittedUpdateBefore: &c.EmittedUpdateBefore, MetricEmittedUpdateAfter: &c.EmittedUpdateAfter,
		MetricEmittedDelete: &c.EmittedDelete,
	}
}

var (
	cRowsIn           = beam.NewCounter(Namespace, MetricRowsIn)
	cDeadLettered     = beam.NewCounter(Namespace, MetricDeadLettered)
	cKeysExpired      = beam.NewCounter(Namespace, MetricKeysExpired)
	cRefreshes        = beam.NewCounter(Namespace, MetricTTLRefreshes)
	cMiniBatchDropped = beam.NewCounter(Namespace, MetricMiniBatchDropped)
	cStateReads       = beam.NewCounter(Namespace, MetricStateReads)
	cStateWrites      = beam.NewCounter(Namespace, MetricStateWrites)
	cStateGets        = beam.NewCounter(Namespace, MetricStateGets)
	cStateAppends     = beam.NewCounter(Namespace, MetricStateAppends)
	cStateClears      = beam.NewCounter(Namespace, MetricStateClears)
	cStateCacheHits   = beam.NewCounter(Namespace, MetricStateCacheHits)
	cTimerSets        = beam.NewCounter(Namespace, MetricTimerSets)

	cOutcome = func() (cs [core.NumOutcomes]beam.Counter) {
		for o, name := range outcomeMetrics {
			if name != "" {
				cs[o] = beam.NewCounter(Namespace, name)
			}
		}
		return cs
	}()
	// cEmittedKind counts KeepLast's output rows by kind; +I rows are
	// counted by their outcome (inserts), so Insert has no counter here.
	cEmittedKind = [...]beam.Counter{
		rowkind.Insert:       {},
		rowkind.UpdateBefore: beam.NewCounter(Namespace, MetricEmittedUpdateBefore),
		rowkind.UpdateAfter:  beam.NewCounter(Namespace, MetricEmittedUpdateAfter),
		rowkind.Delete:       beam.NewCounter(Namespace, MetricEmittedDelete),
	}
)

// countOutcome counts n rows with outcome o: the one place where an
// outcome becomes a metric.
func countOutcome(ctx context.Context, o core.Outcome, n int64) {
	if outcomeMetrics[o] != "" {
		cOutcome[o].Inc(ctx, n)
	}
}

// countDecision counts what a stateful decision did to its row.
func countDecision(ctx context.Context, d *core.Decision) {
	countOutcome(ctx, d.Outcome, 1)
	if d.Expired {
		cKeysExpired.Inc(ctx, 1)
	}
	if d.Refreshed {
		cRefreshes.Inc(ctx, 1)
	}
}

// countSettlement counts where a merge's rows went.
func countSettlement(ctx context.Context, s *core.Settlement) {
	for o, n := range s.Counts {
		if n != 0 {
			countOutcome(ctx, core.Outcome(o), n)
		}
	}
}

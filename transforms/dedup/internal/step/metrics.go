package step

import (
	"context"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamdedup/beamdedup/transforms/dedup/internal/core"
	"github.com/beamdedup/beamdedup/transforms/rowkind"
)

// The counters' names, in each transform's namespace (beamdedup/dedup/<transform>/<UID>):
// the fields of dedup.Counters and dedup.LastCounters read them, and
// docs/keepfirst.md and docs/keeplast.md list them for users. Every input
// row of KeepFirst (and of window dedup) lands in exactly one of Emitted,
// DuplicatesDropped, LateDropped, CandidatesReplaced, ChangelogSwallowed,
// RetractionsIgnored and DeadLettered, or is still a pending candidate:
// RowsIn = the sum of those + pending (Counters.Pending).
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

// KeepLast's counters, beside rows_in, duplicates_dropped,
// retractions_ignored, keys_expired, dead_lettered, ttl_refreshes,
// minibatch_dropped and the cost. Every input row of
// KeepLast lands in exactly one of Inserts, Updates, DeletesIn,
// DuplicatesDropped, OutOfOrderDropped, RetractionsIgnored, DeadLettered
// and Superseded (see LastCounters.Unaccounted). The Emitted* counters
// count output rows by kind (+I rows are Inserts).
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

// metricSet is one namespace's counters: a transform's. Every step of it
// counts into the set of its namespace, made at Setup.
type metricSet struct {
	rowsIn, deadLettered, keysExpired, refreshes, miniBatchDropped beam.Counter
	stateReads, stateWrites, stateGets, stateAppends, stateClears  beam.Counter
	stateCacheHits, timerSets                                      beam.Counter
	outcome                                                        [core.NumOutcomes]beam.Counter
	// emittedKind counts KeepLast's output rows by kind; +I rows are
	// counted by their outcome (inserts), so Insert has no counter here.
	emittedKind [4]beam.Counter
}

func newMetricSet(ns string) *metricSet {
	m := &metricSet{
		rowsIn: beam.NewCounter(ns, MetricRowsIn), deadLettered: beam.NewCounter(ns, MetricDeadLettered),
		keysExpired: beam.NewCounter(ns, MetricKeysExpired), refreshes: beam.NewCounter(ns, MetricTTLRefreshes),
		miniBatchDropped: beam.NewCounter(ns, MetricMiniBatchDropped),
		stateReads:       beam.NewCounter(ns, MetricStateReads), stateWrites: beam.NewCounter(ns, MetricStateWrites),
		stateGets: beam.NewCounter(ns, MetricStateGets), stateAppends: beam.NewCounter(ns, MetricStateAppends),
		stateClears: beam.NewCounter(ns, MetricStateClears), stateCacheHits: beam.NewCounter(ns, MetricStateCacheHits),
		timerSets: beam.NewCounter(ns, MetricTimerSets),
	}
	for o, name := range outcomeMetrics {
		if name != "" {
			m.outcome[o] = beam.NewCounter(ns, name)
		}
	}
	m.emittedKind[rowkind.UpdateBefore] = beam.NewCounter(ns, MetricEmittedUpdateBefore)
	m.emittedKind[rowkind.UpdateAfter] = beam.NewCounter(ns, MetricEmittedUpdateAfter)
	m.emittedKind[rowkind.Delete] = beam.NewCounter(ns, MetricEmittedDelete)
	return m
}

// outcomeOf counts n rows with outcome o: the one place where an outcome
// becomes a metric.
func (m *metricSet) outcomeOf(ctx context.Context, o core.Outcome, n int64) {
	if outcomeMetrics[o] != "" {
		m.outcome[o].Inc(ctx, n)
	}
}

// decision counts what a stateful decision did to its row.
func (m *metricSet) decision(ctx context.Context, d *core.Decision) {
	m.outcomeOf(ctx, d.Outcome, 1)
	if d.Expired {
		m.keysExpired.Inc(ctx, 1)
	}
	if d.Refreshed {
		m.refreshes.Inc(ctx, 1)
	}
}

// settlement counts where a merge's rows went.
func (m *metricSet) settlement(ctx context.Context, s *core.Settlement) {
	for o, n := range s.Counts {
		if n != 0 {
			m.outcomeOf(ctx, core.Outcome(o), n)
		}
	}
	if s.Emit && s.Kind != rowkind.Insert { // a +I is counted as its row's outcome
		m.emittedKind[s.Kind].Inc(ctx, 1)
	}
}

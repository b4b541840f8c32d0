package dedup

import (
	"cmp"
	"context"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamdedup/beamdedup/transforms/dedup/core"
	"github.com/beamdedup/beamdedup/transforms/internal/metricsum"
	"github.com/beamdedup/beamdedup/transforms/rowkind"
)

// Namespace is the prefix of the Beam metrics namespaces of this package's
// counters: a transform counts in Namespace/<transform>/<UID>, for
// example beamdedup/dedup/KeepFirst/orders-dedup, so that each instance is
// read apart (CountersOf) and KeepLast's counters, whose rows have other
// outcomes, apart from the others'. Every package of beamdedup counts
// under beamdedup/<package>.
const Namespace = "beamdedup/dedup"

// metricsNamespace is the namespace of the counters of transform t named
// uid.
func metricsNamespace(t transform, uid string) string {
	return Namespace + "/" + t.String() + "/" + uid
}

// readInto sums into fields the counters of the instances of ts whose UID
// is uid ("" every UID).
func readInto(pr beam.PipelineResult, uid string, fields map[string]*int64, ts ...transform) {
	for _, t := range ts {
		if uid != "" {
			metricsum.Sum(pr, metricsNamespace(t, uid), fields)
		} else {
			metricsum.SumPrefix(pr, Namespace+"/"+t.String()+"/", fields)
		}
	}
}

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

// Cost is what the stateful steps cost: reads of a key's state and writes
// of a change (SDK calls), the Fn API state requests they made by kind,
// the reads a bundle's cache spared, and timers set.
type Cost struct {
	StateReads, StateWrites, StateGets, StateAppends, StateClears, StateCacheHits, TimerSets int64
}

// Counters are the counters of KeepFirst and window dedup, summed over the
// instances read (ReadCounters, CountersOf).
type Counters struct {
	RowsIn, Emitted, DuplicatesDropped, LateDropped, CandidatesReplaced,
	ChangelogSwallowed, RetractionsIgnored, KeysExpired, DeadLettered,
	TTLRefreshes, MiniBatchDropped int64
	Cost
}

// Pending is the number of input rows not yet accounted for: candidates
// still waiting for the watermark. It is 0 after a bounded run.
func (c Counters) Pending() int64 {
	return c.RowsIn - c.Emitted - c.DuplicatesDropped - c.LateDropped - c.CandidatesReplaced -
		c.ChangelogSwallowed - c.RetractionsIgnored - c.DeadLettered
}

// LastCounters are KeepLast's counters, summed over the instances read
// (ReadLastCounters, LastCountersOf).
type LastCounters struct {
	RowsIn, Inserts, Updates, DeletesIn, DuplicatesDropped, OutOfOrderDropped,
	RetractionsIgnored, Superseded, KeysExpired, DeadLettered, TTLRefreshes, MiniBatchDropped,
	EmittedUpdateBefore, EmittedUpdateAfter, EmittedDelete int64
	Cost
}

// Unaccounted is the number of input rows in no outcome counter; it is 0
// after any run (KeepLast holds no row back).
func (c LastCounters) Unaccounted() int64 {
	return c.RowsIn - c.Inserts - c.Updates - c.DeletesIn - c.DuplicatesDropped - c.OutOfOrderDropped -
		c.RetractionsIgnored - c.DeadLettered - c.Superseded
}

// Emitted is the number of output rows by the counters: +I, -U, +U and -D
// rows.
func (c LastCounters) Emitted() int64 {
	return c.Inserts + c.EmittedUpdateBefore + c.EmittedUpdateAfter + c.EmittedDelete
}

// ReadCounters sums the counters of every KeepFirst and window dedup of a
// pipeline run.
func ReadCounters(pr beam.PipelineResult) Counters { return CountersOf(pr, "") }

// CountersOf reads the counters of the KeepFirst or window dedup whose UID
// (or default name) is uid; "" sums every one.
func CountersOf(pr beam.PipelineResult, uid string) Counters {
	var c Counters
	readInto(pr, uid, c.fields(), keepFirst, windowFirst, windowLast)
	return c
}

// ReadLastCounters sums the counters of every KeepLast of a pipeline run.
func ReadLastCounters(pr beam.PipelineResult) LastCounters { return LastCountersOf(pr, "") }

// LastCountersOf reads the counters of the KeepLast whose UID (or default
// name) is uid; "" sums every one.
func LastCountersOf(pr beam.PipelineResult, uid string) LastCounters {
	var c LastCounters
	readInto(pr, uid, c.fields(), keepLast)
	return c
}

func (c *Cost) fields(m map[string]*int64) map[string]*int64 {
	m[MetricStateReads], m[MetricStateWrites], m[MetricStateGets] = &c.StateReads, &c.StateWrites, &c.StateGets
	m[MetricStateAppends], m[MetricStateClears], m[MetricStateCacheHits] = &c.StateAppends, &c.StateClears, &c.StateCacheHits
	m[MetricTimerSets] = &c.TimerSets
	return m
}

func (c *Counters) fields() map[string]*int64 {
	return c.Cost.fields(map[string]*int64{
		MetricRowsIn: &c.RowsIn, MetricEmitted: &c.Emitted, MetricDuplicatesDropped: &c.DuplicatesDropped,
		MetricLateDropped: &c.LateDropped, MetricCandidatesReplaced: &c.CandidatesReplaced,
		MetricChangelogSwallowed: &c.ChangelogSwallowed, MetricRetractionsIgnored: &c.RetractionsIgnored,
		MetricKeysExpired: &c.KeysExpired, MetricDeadLettered: &c.DeadLettered, MetricTTLRefreshes: &c.TTLRefreshes,
		MetricMiniBatchDropped: &c.MiniBatchDropped,
	})
}

func (c *LastCounters) fields() map[string]*int64 {
	return c.Cost.fields(map[string]*int64{
		MetricRowsIn: &c.RowsIn, MetricInserts: &c.Inserts, MetricUpdates: &c.Updates, MetricDeletesIn: &c.DeletesIn,
		MetricDuplicatesDropped: &c.DuplicatesDropped, MetricOutOfOrderDropped: &c.OutOfOrderDropped,
		MetricRetractionsIgnored: &c.RetractionsIgnored, MetricSuperseded: &c.Superseded,
		MetricKeysExpired: &c.KeysExpired, MetricDeadLettered: &c.DeadLettered, MetricTTLRefreshes: &c.TTLRefreshes,
		MetricMiniBatchDropped:    &c.MiniBatchDropped,
		MetricEmittedUpdateBefore: &c.EmittedUpdateBefore, MetricEmittedUpdateAfter: &c.EmittedUpdateAfter,
		MetricEmittedDelete: &c.EmittedDelete,
	})
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
	ns = cmp.Or(ns, Namespace) // a DoFn made without a transform's (a test's)
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

// read counts a read of a key's state.
func (m *metricSet) read(ctx context.Context) {
	m.stateReads.Inc(ctx, 1)
	m.stateGets.Inc(ctx, getsPerRead)
}

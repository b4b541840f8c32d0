package dedup

import (
	"context"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamdedup/beamdedup/transforms/dedup/core"
	"github.com/beamdedup/beamdedup/transforms/rowkind"
)

// Namespace is the Beam metrics namespace of every counter of this package.
const Namespace = "beamdedup"

// Counter names. Every input row lands in exactly one of Emitted,
// DuplicatesDropped, LateDropped, CandidatesReplaced, ChangelogSwallowed,
// RetractionsIgnored and DeadLettered, or is still a pending candidate:
// RowsIn = the sum of those + pending.
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
	MetricStateReads         = "state_reads"
	MetricStateWrites        = "state_writes"
	MetricTimerSets          = "timer_sets"
	// MetricMiniBatchDropped counts the part of DuplicatesDropped (KeepFirst)
	// or Superseded (KeepLast's fold) that the mini-batch dropped before the
	// keyed step.
	MetricMiniBatchDropped = "minibatch_dropped"
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

// Counters are the totals of this package's counters over all KeepFirst
// steps of a pipeline run.
type Counters struct {
	RowsIn, Emitted, DuplicatesDropped, LateDropped, CandidatesReplaced,
	ChangelogSwallowed, RetractionsIgnored, KeysExpired, DeadLettered,
	TTLRefreshes, StateReads, StateWrites, TimerSets, MiniBatchDropped int64
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

// RowCounts returns c without the state-access and refresh counters, which
// depend on bundling: what is left is where each row went.
func (c Counters) RowCounts() Counters {
	c.StateReads, c.StateWrites, c.TimerSets, c.TTLRefreshes, c.MiniBatchDropped = 0, 0, 0, 0, 0
	return c
}

// WithoutExpiry returns c without KeysExpired, which also counts state
// dropped at the end of a window or of the input.
func (c Counters) WithoutExpiry() Counters {
	c.KeysExpired = 0
	return c
}

// ReadCounters sums this package's counters from a pipeline result.
func ReadCounters(pr beam.PipelineResult) Counters {
	var c Counters
	if pr == nil {
		return c
	}
	for _, r := range pr.Metrics().AllMetrics().Counters() {
		if r.Namespace() != Namespace {
			continue
		}
		if p := c.field(r.Name()); p != nil {
			*p += r.Result()
		}
	}
	return c
}

func (c *Counters) field(name string) *int64 {
	switch name {
	case MetricRowsIn:
		return &c.RowsIn
	case MetricEmitted:
		return &c.Emitted
	case MetricDuplicatesDropped:
		return &c.DuplicatesDropped
	case MetricLateDropped:
		return &c.LateDropped
	case MetricCandidatesReplaced:
		return &c.CandidatesReplaced
	case MetricChangelogSwallowed:
		return &c.ChangelogSwallowed
	case MetricRetractionsIgnored:
		return &c.RetractionsIgnored
	case MetricKeysExpired:
		return &c.KeysExpired
	case MetricDeadLettered:
		return &c.DeadLettered
	case MetricTTLRefreshes:
		return &c.TTLRefreshes
	case MetricStateReads:
		return &c.StateReads
	case MetricStateWrites:
		return &c.StateWrites
	case MetricTimerSets:
		return &c.TimerSets
	case MetricMiniBatchDropped:
		return &c.MiniBatchDropped
	case MetricInserts:
		return &c.Inserts
	case MetricUpdates:
		return &c.Updates
	case MetricDeletesIn:
		return &c.DeletesIn
	case MetricOutOfOrderDropped:
		return &c.OutOfOrderDropped
	case MetricSuperseded:
		return &c.Superseded
	case MetricEmittedUpdateBefore:
		return &c.EmittedUpdateBefore
	case MetricEmittedUpdateAfter:
		return &c.EmittedUpdateAfter
	case MetricEmittedDelete:
		return &c.EmittedDelete
	}
	return nil
}

var (
	cRowsIn           = beam.NewCounter(Namespace, MetricRowsIn)
	cDeadLettered     = beam.NewCounter(Namespace, MetricDeadLettered)
	cKeysExpired      = beam.NewCounter(Namespace, MetricKeysExpired)
	cRefreshes        = beam.NewCounter(Namespace, MetricTTLRefreshes)
	cStateReads       = beam.NewCounter(Namespace, MetricStateReads)
	cStateWrites      = beam.NewCounter(Namespace, MetricStateWrites)
	cTimerSets        = beam.NewCounter(Namespace, MetricTimerSets)
	cMiniBatchDropped = beam.NewCounter(Namespace, MetricMiniBatchDropped)
	cOutcome          = [...]beam.Counter{
		core.Emit:             beam.NewCounter(Namespace, MetricEmitted),
		core.BecomeCandidate:  {}, // counted when it is emitted or replaced
		core.ReplaceCandidate: beam.NewCounter(Namespace, MetricCandidatesReplaced),
		core.DropDuplicate:    beam.NewCounter(Namespace, MetricDuplicatesDropped),
		core.DropLate:         beam.NewCounter(Namespace, MetricLateDropped),
		core.Swallow:          beam.NewCounter(Namespace, MetricChangelogSwallowed),
		core.IgnoreRetraction: beam.NewCounter(Namespace, MetricRetractionsIgnored),
	}
)

var (
	cSuperseded  = beam.NewCounter(Namespace, MetricSuperseded)
	cLastOutcome = [...]beam.Counter{
		core.Inserted:          beam.NewCounter(Namespace, MetricInserts),
		core.Updated:           beam.NewCounter(Namespace, MetricUpdates),
		core.DeletedIn:         beam.NewCounter(Namespace, MetricDeletesIn),
		core.Duplicate:         cOutcome[core.DropDuplicate],
		core.OutOfOrder:        beam.NewCounter(Namespace, MetricOutOfOrderDropped),
		core.IgnoredRetraction: cOutcome[core.IgnoreRetraction],
	}
	// cEmittedKind counts KeepLast's output rows by kind; +I rows are
	// counted by their outcome (inserts), so Insert has no counter here.
	cEmittedKind = [...]beam.Counter{
		rowkind.Insert:       {},
		rowkind.UpdateBefore: beam.NewCounter(Namespace, MetricEmittedUpdateBefore),
		rowkind.UpdateAfter:  beam.NewCounter(Namespace, MetricEmittedUpdateAfter),
		rowkind.Delete:       beam.NewCounter(Namespace, MetricEmittedDelete),
	}
)

func countOutcome(ctx context.Context, o core.Outcome) {
	if o != core.BecomeCandidate {
		cOutcome[o].Inc(ctx, 1)
	}
}

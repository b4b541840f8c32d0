package dedup

import (
	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamdedup/beamdedup/transforms/dedup/internal/step"
	"github.com/beamdedup/beamdedup/transforms/internal/metricsum"
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
	m[step.MetricStateReads], m[step.MetricStateWrites], m[step.MetricStateGets] = &c.StateReads, &c.StateWrites, &c.StateGets
	m[step.MetricStateAppends], m[step.MetricStateClears], m[step.MetricStateCacheHits] = &c.StateAppends, &c.StateClears, &c.StateCacheHits
	m[step.MetricTimerSets] = &c.TimerSets
	return m
}

func (c *Counters) fields() map[string]*int64 {
	return c.Cost.fields(map[string]*int64{
		step.MetricRowsIn: &c.RowsIn, step.MetricEmitted: &c.Emitted, step.MetricDuplicatesDropped: &c.DuplicatesDropped,
		step.MetricLateDropped: &c.LateDropped, step.MetricCandidatesReplaced: &c.CandidatesReplaced,
		step.MetricChangelogSwallowed: &c.ChangelogSwallowed, step.MetricRetractionsIgnored: &c.RetractionsIgnored,
		step.MetricKeysExpired: &c.KeysExpired, step.MetricDeadLettered: &c.DeadLettered, step.MetricTTLRefreshes: &c.TTLRefreshes,
		step.MetricMiniBatchDropped: &c.MiniBatchDropped,
	})
}

func (c *LastCounters) fields() map[string]*int64 {
	return c.Cost.fields(map[string]*int64{
		step.MetricRowsIn: &c.RowsIn, step.MetricInserts: &c.Inserts, step.MetricUpdates: &c.Updates, step.MetricDeletesIn: &c.DeletesIn,
		step.MetricDuplicatesDropped: &c.DuplicatesDropped, step.MetricOutOfOrderDropped: &c.OutOfOrderDropped,
		step.MetricRetractionsIgnored: &c.RetractionsIgnored, step.MetricSuperseded: &c.Superseded,
		step.MetricKeysExpired: &c.KeysExpired, step.MetricDeadLettered: &c.DeadLettered, step.MetricTTLRefreshes: &c.TTLRefreshes,
		step.MetricMiniBatchDropped:    &c.MiniBatchDropped,
		step.MetricEmittedUpdateBefore: &c.EmittedUpdateBefore, step.MetricEmittedUpdateAfter: &c.EmittedUpdateAfter,
		step.MetricEmittedDelete: &c.EmittedDelete,
	})
}

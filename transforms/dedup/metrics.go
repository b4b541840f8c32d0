package dedup

import (
	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamdedup/beamdedup/transforms/dedup/internal/step"
	"github.com/beamdedup/beamdedup/transforms/internal/metricsum"
)

// namespace is the prefix of the Beam metrics namespaces of this package's
// counters: a transform counts in beamdedup/dedup/<transform>/<UID> (see
// Counters).
const namespace = "beamdedup/dedup"

// metricsNamespace is the namespace of the counters of transform t named
// uid.
func metricsNamespace(t transform, uid string) string {
	return namespace + "/" + t.String() + "/" + uid
}

// readInto sums into fields the counters of the instances of ts whose UID
// is uid ("" every UID).
func readInto(pr beam.PipelineResult, uid string, fields map[string]*int64, ts ...transform) {
	for _, t := range ts {
		if uid != "" {
			metricsum.Sum(pr, metricsNamespace(t, uid), fields)
		} else {
			metricsum.SumPrefix(pr, namespace+"/"+t.String()+"/", fields)
		}
	}
}

// Cost is what the stateful steps cost; each field is the sum of the Beam
// counter of that name in the transform's namespace.
type Cost struct {
	StateReads     int64 // state_reads: reads of a key's state (SDK calls)
	StateWrites    int64 // state_writes: writes of a change (SDK calls)
	StateGets      int64 // state_gets: the Fn API get requests they made
	StateAppends   int64 // state_appends: append requests
	StateClears    int64 // state_clears: clear requests
	StateCacheHits int64 // state_cache_hits: reads a bundle's cache spared
	TimerSets      int64 // timer_sets: timers set
}

// Counters are the counters of KeepFirst and window dedup, summed over the
// instances read (ReadCounters, CountersOf). Each field is the sum of the
// Beam counter of that name in namespace beamdedup/dedup/<transform>/<UID>,
// for example beamdedup/dedup/KeepFirst/orders-dedup, so that each
// instance is read apart, as a runner's metrics show it
// (docs/keepfirst.md, "Metrics"). Every input row lands in exactly one of
// emitted, duplicates_dropped, late_dropped, candidates_replaced,
// changelog_swallowed, retractions_ignored and dead_lettered, or is a
// candidate still pending (Pending).
type Counters struct {
	RowsIn             int64 // rows_in: rows entering the transform
	Emitted            int64 // emitted: rows emitted
	DuplicatesDropped  int64 // duplicates_dropped: later rows of a kept key
	LateDropped        int64 // late_dropped: event-time rows of a key already emitted
	CandidatesReplaced int64 // candidates_replaced: pending candidates replaced by an earlier row
	ChangelogSwallowed int64 // changelog_swallowed: -U/-D rows of an emitted key
	RetractionsIgnored int64 // retractions_ignored: -U/-D rows of a key not seen
	KeysExpired        int64 // keys_expired: key periods a TTL ended
	DeadLettered       int64 // dead_lettered: rows that could not be processed
	TTLRefreshes       int64 // ttl_refreshes: duplicates that extended a key's retention
	// MiniBatchDropped, minibatch_dropped: the part of DuplicatesDropped
	// dropped before the shuffle.
	MiniBatchDropped int64
	Cost
}

// Pending is the number of input rows not yet accounted for: candidates
// still waiting for the watermark. It is 0 after a bounded run.
func (c Counters) Pending() int64 {
	return c.RowsIn - c.Emitted - c.DuplicatesDropped - c.LateDropped - c.CandidatesReplaced -
		c.ChangelogSwallowed - c.RetractionsIgnored - c.DeadLettered
}

// LastCounters are KeepLast's counters, summed over the instances read
// (ReadLastCounters, LastCountersOf), by the same names
// (docs/keeplast.md, "Metrics"). Every input row lands in exactly one of
// inserts, updates, deletes_in, duplicates_dropped, out_of_order_dropped,
// retractions_ignored, dead_lettered and superseded (Unaccounted).
type LastCounters struct {
	RowsIn             int64 // rows_in: rows entering KeepLast
	Inserts            int64 // inserts: rows that became a key's first row (+I)
	Updates            int64 // updates: rows that replaced a key's stored row
	DeletesIn          int64 // deletes_in: -U/-D rows that deleted a key's stored row
	DuplicatesDropped  int64 // duplicates_dropped: rows equal to the stored one
	OutOfOrderDropped  int64 // out_of_order_dropped: ordered rows below the stored value
	RetractionsIgnored int64 // retractions_ignored: -U/-D rows of a key not stored
	Superseded         int64 // superseded: rows merged away before the state (bounded input, the mini-batch fold)
	KeysExpired        int64 // keys_expired: key periods a TTL ended
	DeadLettered       int64 // dead_lettered: rows that could not be processed
	TTLRefreshes       int64 // ttl_refreshes: duplicates that extended a key's retention
	MiniBatchDropped   int64 // minibatch_dropped: the part of Superseded the fold merged away
	// EmittedUpdateBefore, EmittedUpdateAfter and EmittedDelete
	// (emitted_update_before, emitted_update_after, emitted_delete) count
	// the -U, +U and -D rows emitted; +I rows are Inserts.
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

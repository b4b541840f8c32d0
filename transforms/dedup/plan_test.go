package dedup

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/transforms/dedup/internal/core"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// The plan, from options and input: which expansion, which rules, which
// state layout and timer family, and which mini-batch step.
func TestPlan_FromOptionsAndInput(t *testing.T) {
	stream := input{globalWindows: true}
	file := input{bounded: true, globalWindows: true}
	windowed := input{bounded: true}
	type want struct {
		expansion  expansion
		last       bool
		dir        core.Direction
		layout     layout
		family     core.Family
		preFilter  bool
		fold       bool
		localMerge bool
		bucketed   bool
		eventTime  bool
		cleanup    bool
		buckets    int
	}
	for _, tc := range []struct {
		name string
		t    transform
		opts []Option
		in   input
		want want
	}{
		{"KeepFirst on a stream: marks, no timer, pre-filter", keepFirst, nil, stream,
			want{expansion: statefulExpansion, layout: marks, preFilter: true, cleanup: true}},
		{"KeepFirst with StateTTL: processing-time cleanup", keepFirst, []Option{StateTTL(time.Hour)}, stream,
			want{expansion: statefulExpansion, layout: marks, family: core.ProcessingTimeFamily, preFilter: true, cleanup: true}},
		{"KeepFirst with EventTimeTTL: event-time cleanup, no pre-filter", keepFirst, []Option{EventTimeTTL(time.Hour)}, stream,
			want{expansion: statefulExpansion, layout: marks, family: core.EventTimeFamily, cleanup: true}},
		{"KeepFirst with StateTTL, no cleanup timers", keepFirst, []Option{StateTTL(time.Hour), CleanupTimers(false)}, stream,
			want{expansion: statefulExpansion, layout: marks, preFilter: true}},
		{"KeepFirst in event time: versions, event-time finalization", keepFirst, []Option{rowspec.OnTime("ts")}, stream,
			want{expansion: statefulExpansion, layout: versions, family: core.EventTimeFamily, preFilter: true, eventTime: true, cleanup: true}},
		{"KeepFirst without mini-batch", keepFirst, []Option{MiniBatch(false)}, stream,
			want{expansion: statefulExpansion, layout: marks, cleanup: true}},
		{"KeepFirst on a file: in-bundle merge, bucketed", keepFirst, nil, file,
			want{expansion: mergeExpansion, localMerge: true, bucketed: true}},
		{"KeepFirst on a windowed file: lifted combine", keepFirst, nil, windowed,
			want{expansion: mergeExpansion}},
		{"KeepFirst on a file without mini-batch: lifted combine, not bucketed", keepFirst, []Option{MiniBatch(false)}, file,
			want{expansion: mergeExpansion}},
		{"KeepFirst on a file, forced stateful: no cleanup timers, state per bucket", keepFirst, []Option{forceStateful(), StateTTL(time.Hour)}, file,
			want{expansion: statefulExpansion, layout: marks, preFilter: true, buckets: defaultStateBuckets}},
		{"KeepFirst on a file, forced stateful, a cell per key", keepFirst, []Option{forceStateful(), StateBuckets(0)}, file,
			want{expansion: statefulExpansion, layout: marks, preFilter: true}},
		{"KeepFirst on a file with EventTimeTTL: stateful, state per bucket", keepFirst, []Option{EventTimeTTL(time.Hour)}, file,
			want{expansion: statefulExpansion, layout: marks, buckets: defaultStateBuckets}},
		{"KeepFirst on a stream, state per bucket", keepFirst, []Option{StateBuckets(16)}, stream,
			want{expansion: statefulExpansion, layout: marks, preFilter: true, cleanup: true, buckets: 16}},
		{"KeepLast on a stream in event time, state per bucket", keepLast, []Option{rowspec.Upsert(), EventTimeTTL(time.Hour), StateBuckets(16)}, stream,
			want{expansion: statefulExpansion, last: true, dir: core.KeepLast, layout: versions, family: core.EventTimeFamily, cleanup: true, buckets: 16}},
		{"KeepFirst on a file, forced stateful, windowed: a cell per key", keepFirst, []Option{forceStateful()}, windowed,
			want{expansion: statefulExpansion, layout: marks, preFilter: true}},
		{"KeepFirst on a file by SequenceBy: merge, bucketed", keepFirst, []Option{rowspec.SequenceBy("seq")}, file,
			want{expansion: mergeExpansion, localMerge: true, bucketed: true}},
		{"KeepLast on a stream: versions, fold", keepLast, []Option{rowspec.Upsert()}, stream,
			want{expansion: statefulExpansion, last: true, dir: core.KeepLast, layout: versions, fold: true, cleanup: true}},
		{"KeepLast on windowed stream: no fold", keepLast, []Option{rowspec.Upsert()}, input{},
			want{expansion: statefulExpansion, last: true, dir: core.KeepLast, layout: versions, cleanup: true}},
		{"KeepLast with StateTTL", keepLast, []Option{rowspec.Upsert(), StateTTL(time.Hour)}, stream,
			want{expansion: statefulExpansion, last: true, dir: core.KeepLast, layout: versions, family: core.ProcessingTimeFamily, fold: true, cleanup: true}},
		{"KeepLast with OnTime orders, never finalizes", keepLast, []Option{rowspec.Upsert(), rowspec.OnTime("ts")}, stream,
			want{expansion: statefulExpansion, last: true, dir: core.KeepLast, layout: versions, fold: true, cleanup: true}},
		{"KeepLast on a file: merge, last, bucketed", keepLast, []Option{rowspec.Upsert()}, file,
			want{expansion: mergeExpansion, last: true, dir: core.KeepLast, localMerge: true, bucketed: true}},
		{"KeepLast of KVs: no fold", keepLast, []Option{rowspec.Upsert()}, input{globalWindows: true, perKey: true},
			want{expansion: statefulExpansion, last: true, dir: core.KeepLast, layout: versions, cleanup: true}},
		{"KeepFirst of KVs: no pre-filter", keepFirst, nil, input{globalWindows: true, perKey: true},
			want{expansion: statefulExpansion, layout: marks, cleanup: true}},
		{"KeepFirst of KVs on a stream, state per bucket", keepFirst, []Option{StateBuckets(16)}, input{globalWindows: true, perKey: true},
			want{expansion: statefulExpansion, layout: marks, cleanup: true, buckets: 16}},
		{"KeepFirst of KVs on a file, forced stateful: state per bucket", keepFirst, []Option{forceStateful()}, input{bounded: true, globalWindows: true, perKey: true},
			want{expansion: statefulExpansion, layout: marks, buckets: defaultStateBuckets}},
		{"KeepFirst of KVs, float keys on a windowed file: stateful (no lifted combine)", keepFirst, nil, input{bounded: true, perKey: true, floatKey: true},
			want{expansion: statefulExpansion, layout: marks}},
		{"KeepFirst of KVs, float keys on a file: merge, grouped per key", keepFirst, nil, input{bounded: true, globalWindows: true, perKey: true, floatKey: true},
			want{expansion: mergeExpansion, localMerge: true}},
		{"WindowFirst", windowFirst, nil, windowed, want{expansion: windowExpansion}},
		{"WindowLast", windowLast, nil, input{}, want{expansion: windowExpansion, dir: core.KeepLast}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newConfig(tc.opts, tc.t)
			require.NoError(t, c.validate())
			p, err := newPlan(&c, tc.in)
			require.NoError(t, err)
			got := want{expansion: p.expansion, last: p.last, dir: p.dir, layout: p.layout, family: p.family,
				preFilter: p.preFilter, fold: p.fold, localMerge: p.localMerge, bucketed: p.bucketed, eventTime: p.rules.EventTime, cleanup: p.rules.CleanupTimers, buckets: p.buckets}
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestPlan_KeepFirstSequenceByNeedsTheMerge(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []Option
		in   input
		want string
	}{
		{"a stream", nil, input{globalWindows: true}, "which a stream never has"},
		{"forced stateful", []Option{forceStateful()}, input{bounded: true, globalWindows: true}, "only supported by KeepFirst's bounded expansion"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newConfig(append(tc.opts, rowspec.SequenceBy("seq")), keepFirst)
			_, err := newPlan(&c, tc.in)
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

// State per bucket takes rows in the global window, and a count the state
// can be kept in.
func TestPlan_StateBucketsNeedsRowsInTheGlobalWindow(t *testing.T) {
	for _, tc := range []struct {
		name string
		t    transform
		n    int
		in   input
		want string
	}{
		{"windowed input", keepLast, 8, input{}, "windowed input keeps a cell per key and window"},
		{"a negative count", keepFirst, -1, input{globalWindows: true}, "it must be from 0"},
		{"too many", keepFirst, maxStateBuckets + 1, input{globalWindows: true}, "it must be from 0"},
		{"window dedup", windowFirst, 8, input{}, "window deduplication keeps no per-row state"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := []Option{StateBuckets(tc.n)}
			if tc.t == keepLast {
				opts = append(opts, rowspec.Upsert())
			}
			c := newConfig(opts, tc.t)
			err := c.validate()
			if err == nil {
				_, err = newPlan(&c, tc.in)
			}
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

// forceStateful is AsStream, under the name the table had for it
// cannot import.
func forceStateful() Option { return AsStream() }

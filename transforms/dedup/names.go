package dedup

import (
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/timers"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beamdedup/beamdedup/transforms/dedup/internal/step"
)

// What a pipeline's proto names after this package: the steps (Beam names
// a DoFn's step after its type's package path and name: <UID>/Dedup/
// dedup.marksFn), the state cell and timer families, and the functions of
// the merge's accumulator coder. They are what a Dataflow update and a
// Flink savepoint restore match a running job's state by
// (docs/state.md, "The update surface";
// testdata/update-surface.golden), so they stay here, and stay as they
// are. What runs is package step's: each DoFn type embeds its runtime.

// stepNames are the IDs of a step's state cell and timer families, per key
// and per bucket. They are part of the persisted state's identity: never
// rename them. The layouts' IDs differ, so that neither reads the other's
// cells.
type stepNames struct{ state, event, proc, buckets, bucketsEvent, bucketsProc string }

var (
	firstNames = stepNames{"keepfirst", "keepfirst-event", "keepfirst-cleanup", "keepfirst-buckets", "keepfirst-buckets-event", "keepfirst-buckets-cleanup"}
	lastNames  = stepNames{"keeplast", "keeplast-event", "keeplast-cleanup", "keeplast-buckets", "keeplast-buckets-event", "keeplast-buckets-cleanup"}
)

// The stateful DoFns, one per state layout and timer family: each holds
// its cell and its timer, which Beam finds among a DoFn's own fields only.
type (
	// marksFn keeps marks, no timer (KeepFirst watermarkless, no cleanup).
	marksFn struct {
		State state.Bag[int64]
		step.Untimed
	}
	// marksEventFn keeps marks, with event-time cleanup (EventTimeTTL).
	marksEventFn struct {
		State state.Bag[int64]
		Timer timers.EventTime
		step.Timed
	}
	// marksProcFn keeps marks, with processing-time cleanup (StateTTL).
	marksProcFn struct {
		State state.Bag[int64]
		Timer timers.ProcessingTime
		step.Timed
	}
	// versionsFn keeps versions, no timer (KeepLast without cleanup).
	versionsFn struct {
		State state.Bag[[]byte]
		step.Untimed
	}
	// versionsEventFn keeps versions, with event-time timers (KeepFirst's
	// event-time finalization and cleanup, KeepLast's EventTimeTTL
	// cleanup).
	versionsEventFn struct {
		State state.Bag[[]byte]
		Timer timers.EventTime
		step.Timed
	}
	// versionsProcFn keeps versions, with processing-time cleanup
	// (KeepLast with StateTTL).
	versionsProcFn struct {
		State state.Bag[[]byte]
		Timer timers.ProcessingTime
		step.Timed
	}
	// bucketsFn keeps state per key-hash bucket, no timer.
	bucketsFn struct {
		State state.Bag[[]byte]
		step.BucketsUntimed
	}
	// bucketsEventFn keeps state per bucket, with event-time timers.
	bucketsEventFn struct {
		State state.Bag[[]byte]
		Timer timers.EventTime
		step.BucketsTimed
	}
	// bucketsProcFn keeps state per bucket, with processing-time cleanup.
	bucketsProcFn struct {
		State state.Bag[[]byte]
		Timer timers.ProcessingTime
		step.BucketsTimed
	}
)

func (f *marksFn) Setup() error         { return f.Init(step.Marks(&f.State)) }
func (f *marksEventFn) Setup() error    { return f.InitEvent(step.Marks(&f.State), &f.Timer) }
func (f *marksProcFn) Setup() error     { return f.InitProc(step.Marks(&f.State), &f.Timer) }
func (f *versionsFn) Setup() error      { return f.Init(step.Versions(&f.State)) }
func (f *versionsEventFn) Setup() error { return f.InitEvent(step.Versions(&f.State), &f.Timer) }
func (f *versionsProcFn) Setup() error  { return f.InitProc(step.Versions(&f.State), &f.Timer) }
func (f *bucketsFn) Setup() error       { return f.Init(&f.State) }
func (f *bucketsEventFn) Setup() error  { return f.InitEvent(&f.State, &f.Timer) }
func (f *bucketsProcFn) Setup() error   { return f.InitProc(&f.State, &f.Timer) }

// The DoFns of the keying steps and of the merge, and the merge's combine.
type (
	keyRowsFn       struct{ step.KeyRows }
	foldRowsFn      struct{ step.FoldRows }
	keyPairsFn      struct{ step.KeyPairs }
	encodeKeysFn    struct{ step.EncodeKeys }
	decodeKeysFn    struct{ step.DecodeKeys }
	toCandidateFn   struct{ step.ToCandidate }
	fromCandidateFn struct{ step.FromCandidate }
	mergeGroupFn    struct{ step.MergeGroup }
	bucketFn        struct{ step.Bucket }
	bucketRowsFn    struct{ step.BucketRows }
	mergeBucketFn   struct{ step.MergeBucket }
	keyCandidatesFn struct{ step.KeyCandidates }
	windowKeyFn     struct{ step.WindowKey }
	candidateMerge  struct{ step.CandidateMerge }
)

// candidate is the merge's accumulator.
type candidate = step.Candidate

// encodeCandidate and decodeCandidate are candidate's coder (its bytes are
// step's): the lifted combine re-encodes accumulators, which Beam's
// reflective row coder made 6% of the bounded expansion's CPU.
func encodeCandidate(c candidate) []byte { return step.EncodeCandidate(c) }

func decodeCandidate(b []byte) (candidate, error) { return step.DecodeCandidate(b) }

func init() {
	step.Register(&marksFn{}, &marksEventFn{}, &marksProcFn{}, &versionsFn{}, &versionsEventFn{}, &versionsProcFn{},
		&bucketsFn{}, &bucketsEventFn{}, &bucketsProcFn{}, &bucketRowsFn{},
		&keyRowsFn{}, &foldRowsFn{}, &keyPairsFn{}, &encodeKeysFn{}, &decodeKeysFn{}, &toCandidateFn{}, &fromCandidateFn{}, &mergeGroupFn{}, &bucketFn{}, &mergeBucketFn{},
		&keyCandidatesFn{}, &windowKeyFn{})
	register.Combiner1[candidate](&candidateMerge{})
	// Registered so that the custom coder calls them without reflection.
	register.Function1x1(encodeCandidate)
	register.Function1x2(decodeCandidate)
	beam.RegisterType(reflect.TypeFor[candidate]())
	beam.RegisterCoder(reflect.TypeFor[candidate](), encodeCandidate, decodeCandidate)
}

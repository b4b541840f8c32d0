package dedup

import (
	"context"
	"fmt"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/timers"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/typex"

	"github.com/beamdedup/beamdedup/coders/keycoder"
	"github.com/beamdedup/beamdedup/transforms/dedup/internal/core"
	"github.com/beamdedup/beamdedup/transforms/dedup/internal/step"
	"github.com/beamdedup/beamdedup/transforms/internal/pcol"
	"github.com/beamdedup/beamdedup/transforms/internal/prismwarn"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// The construction of every transform of the family: the options and the
// input make the plan (plan.go), and the builder makes the expansion the
// plan names, of the DoFns of names.go.

// Result is what a transform of the family returns.
type Result struct {
	// Rows are the kept rows, of the input's type: KeepFirst's first row
	// per key (its kind set to +I), KeepLast's changelog, window dedup's
	// row per key and window.
	Rows beam.PCollection
	// DeadLetters are the rows the transform could not process (an
	// unknown kind, a NULL event time or sequence value), as
	// deadletter.DeadLetter with the reason.
	DeadLetters beam.PCollection
	// Dropped are, with OutputDropped, the input rows the transform
	// dropped, of the input's type; without it, the zero PCollection.
	Dropped beam.PCollection
	// Spec is the roles of Rows' columns as a sink or a count needs
	// them, an option of theirs as it is (pgsink.Write(s, res.Rows,
	// res.Spec, ...)): the key columns (none for a KV input, keyed by K);
	// for KeepLast also its kind and ordering columns, and whether its
	// rows are upserts (rowspec.Upsert). KeepFirst's and window dedup's
	// rows are insert-only: a sink only inserts them.
	Spec rowspec.Spec
}

// shape is what the construction reads of the input's type.
type shape struct {
	kv      bool         // KV<K,V>, keyed by K
	rowType reflect.Type // the struct rows, or V
	keyType reflect.Type // K, or []byte (the encoded key columns)
	columns []string     // struct rows: the key columns
	checks  step.Columns
}

// build is the one construction of every transform of the family: it reads
// the options and the input, makes the plan and builds the expansion the
// plan names.
func build(s beam.Scope, col beam.PCollection, opts []Option, t transform) (Result, error) {
	c := newConfig(opts, t)
	fail := func(err error) (Result, error) {
		return Result{}, fmt.Errorf("dedup.%v: %w", t, err)
	}
	if err := c.validate(); err != nil {
		return fail(err)
	}
	sh, err := inspect(&c, col)
	if err != nil {
		return fail(err)
	}
	in := input{
		bounded: pcol.IsBounded(col), globalWindows: col.WindowingStrategy().Fn.Kind == window.GlobalWindows,
		perKey: sh.kv, floatKey: sh.kv && (sh.keyType.Kind() == reflect.Float32 || sh.keyType.Kind() == reflect.Float64),
	}
	if t.window() && in.globalWindows {
		return fail(fmt.Errorf("input is in the global window, which never closes on a stream: window it first, e.g. beam.WindowInto(s, window.NewFixedWindows(10*time.Minute), rows), or use KeepFirst/KeepLast for per-row results"))
	}
	p, err := newPlan(&c, in)
	if err != nil {
		return fail(err)
	}
	uid := c.uid
	if uid == "" {
		uid = t.String()
	}
	b := builder{s: s.Scope(uid), c: &c, p: &p, sh: &sh, uid: uid, metrics: metricsNamespace(t, uid)}
	var r Result
	if p.expansion == statefulExpansion {
		prismwarn.Check(context.Background(), prismwarn.Construction, fmt.Sprintf("dedup.%v (UID %s)", t, uid))
		r = b.stateful(col)
	} else {
		r = b.merge(col)
	}
	r.Spec = rowspec.Spec{Key: sh.columns}
	if t == keepLast {
		r.Spec.Kind, r.Spec.OnTime, r.Spec.SequenceBy, r.Spec.Upsert = c.kindCol, c.onTime, c.sequenceBy, c.upsert
	}
	return r, nil
}

// inspect validates the input's type and the options that name its
// columns.
func inspect(c *config, col beam.PCollection) (shape, error) {
	if !col.IsValid() {
		return shape{}, fmt.Errorf("input PCollection is invalid")
	}
	if typex.IsKV(col.Type()) {
		return inspectKV(c, col)
	}
	t := col.Type().Type()
	if t.Kind() != reflect.Struct {
		return shape{}, fmt.Errorf("input must be a PCollection of a Go struct type (a Beam schema row) or of KV<K,V>, got %v", t)
	}
	cols := c.partitionBy
	if c.partitionAll {
		all, err := keycoder.Columns(t)
		if err != nil {
			return shape{}, err
		}
		cols = nil
		for _, col := range all {
			if col.Name == c.kindCol {
				continue // the row kind is not part of the row's identity
			}
			cols = append(cols, col.Name)
		}
	}
	if _, err := keycoder.New(t, cols); err != nil {
		return shape{}, fmt.Errorf("PartitionBy(%q): %w", cols, err)
	}
	sh := shape{rowType: t, keyType: reflect.TypeFor[[]byte](), columns: cols, checks: c.rowChecks()}
	return sh, sh.checks.Setup(t)
}

// inspectKV validates a KV<K,V> input: K is the key, the options name
// columns of V.
func inspectKV(c *config, col beam.PCollection) (shape, error) {
	if c.transform.window() {
		return shape{}, fmt.Errorf("input is %v; window deduplication takes struct rows and keys them by PartitionBy columns", col.Type())
	}
	if c.partitionSet || c.partitionAll {
		return shape{}, fmt.Errorf("PartitionBy/PartitionByAll is not allowed on KV input: the key of each KV is the partition key; drop the option, or key struct rows by their columns")
	}
	kt := col.Type().Components()[0].Type()
	vt := col.Type().Components()[1].Type()
	switch kt.Kind() {
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
	case reflect.Slice:
		if kt.Elem().Kind() != reflect.Uint8 {
			return shape{}, keyTypeError(kt)
		}
	default:
		return shape{}, keyTypeError(kt)
	}
	sh := shape{kv: true, rowType: vt, keyType: kt, checks: c.rowChecks()}
	if c.onTime != "" || c.kindCol != "" || c.sequenceBy != "" {
		if err := sh.checks.Setup(vt); err != nil {
			return shape{}, err
		}
	}
	return sh, nil
}

func keyTypeError(kt reflect.Type) error {
	return fmt.Errorf("KV key type %v cannot be a deterministic key; use a string, []byte, bool, integer or float key (or struct rows with PartitionBy)", kt)
}

// rowChecks are the reader of the columns the options name.
func (c *config) rowChecks() step.Columns {
	return step.Columns{TimeCol: c.onTime, KindCol: c.kindCol, SeqCol: c.sequenceBy}
}

// builder builds the expansion of a plan.
type builder struct {
	s   beam.Scope // the transform's scope, named by its UID
	c   *config
	p   *plan
	sh  *shape
	uid string
	// metrics is the namespace of the transform's counters.
	metrics string
}

// keyRows is the keying step's configuration for struct rows.
func (b *builder) keyRows() step.KeyRows {
	return step.KeyRows{
		RowType: beam.EncodedType{T: b.sh.rowType}, Columns: b.sh.columns, Checks: b.sh.checks, UID: b.uid,
		Clock: b.c.hooks.Clock, Dropped: b.c.dropped, Metrics: b.metrics,
	}
}

// result is the Result of kept rows and dead letters, with the dropped
// rows flattened when OutputDropped asked for them.
func (b *builder) result(rows, dead beam.PCollection, dropped ...beam.PCollection) Result {
	r := Result{Rows: rows, DeadLetters: dead}
	if b.c.dropped {
		r.Dropped = beam.Flatten(b.s.Scope("Dropped"), dropped...)
	}
	return r
}

// dropKey drops the encoded key of struct rows' KV<key, row> collections.
func (b *builder) dropKey(name string, kvs beam.PCollection) beam.PCollection {
	if b.sh.kv {
		return kvs
	}
	return beam.DropKey(b.s.Scope(name), kvs)
}

// stateful builds the stateful expansion: the keying step (with
// KeepFirst's pre-filter or KeepLast's fold), then the stateful step.
func (b *builder) stateful(col beam.PCollection) Result {
	p, vt := b.p, b.sh.rowType
	if b.sh.kv {
		keyed, dead := beam.ParDo2(b.s.Scope("Key"), b.keyPairs(), col)
		if p.buckets == 0 {
			kept, dropped := statefulStep(b.s, keyed, b.c, p, vt, b.metrics)
			return b.result(kept, dead, dropped)
		}
		// Per bucket, the step keys its tables by the key's bytes.
		kt := beam.EncodedType{T: b.sh.keyType}
		keyed = beam.ParDo(b.s.Scope("EncodeKeys"), &encodeKeysFn{step.EncodeKeys{KeyType: kt}}, keyed)
		keyed = beam.ParDo(b.s.Scope("Buckets"), &bucketRowsFn{step.BucketRows{RowType: beam.EncodedType{T: vt}, Buckets: p.buckets}}, keyed)
		kept, dropped := statefulStep(b.s, keyed, b.c, p, vt, b.metrics)
		decode := func(name string, kvs beam.PCollection) beam.PCollection {
			return beam.ParDo(b.s.Scope(name), &decodeKeysFn{step.DecodeKeys{KeyType: kt}}, kvs, beam.TypeDefinition{Var: beam.UType, T: b.sh.keyType})
		}
		if !p.dropped {
			return Result{Rows: decode("DecodeKeys", kept), DeadLetters: dead}
		}
		return b.result(decode("DecodeKeys", kept), dead, decode("DecodeKeysDropped", dropped))
	}
	kr := b.keyRows()
	kr.PreFilter, kr.Rules = p.preFilter, p.rules
	var keyFn any = &keyRowsFn{kr}
	if p.fold {
		keyFn = &foldRowsFn{step.FoldRows{Rows: kr}}
	}
	keyed, dead, early := beam.ParDo3(b.s.Scope("Key"), keyFn, col)
	if p.buckets > 0 {
		keyed = beam.ParDo(b.s.Scope("Buckets"), &bucketRowsFn{step.BucketRows{RowType: beam.EncodedType{T: vt}, Buckets: p.buckets}}, keyed)
	}
	kept, dropped := statefulStep(b.s, keyed, b.c, p, vt, b.metrics)
	rows := beam.DropKey(b.s.Scope("DropKey"), kept)
	if !p.dropped {
		return Result{Rows: rows, DeadLetters: dead}
	}
	return b.result(rows, dead, early, b.dropKey("DropKeyDropped", dropped))
}

// keyPairs is the keying step of a KV input.
func (b *builder) keyPairs() *keyPairsFn {
	return &keyPairsFn{step.KeyPairs{ValueType: beam.EncodedType{T: b.sh.rowType}, KeyKind: int(b.sh.keyType.Kind()), Checks: b.sh.checks, UID: b.uid, Metrics: b.metrics}}
}

// statefulStep applies the DoFn of the plan's layout and timer family to
// keyed, KV<key, row> of row type vt (or, per bucket, KV<bucket, batch of
// rows>), and returns its kept and dropped rows, KV<key, row> both.
func statefulStep(s beam.Scope, keyed beam.PCollection, c *config, p *plan, vt reflect.Type, metrics string) (kept, dropped beam.PCollection) {
	fn := newStatefulFn(c, p, keyed.Type().Components()[0].Type(), vt, metrics)
	if p.buckets > 0 {
		return beam.ParDo2(s.Scope("Dedup"), fn, keyed, beam.TypeDefinition{Var: beam.TType, T: reflect.TypeFor[[]byte]()}, beam.TypeDefinition{Var: beam.VType, T: vt})
	}
	return beam.ParDo2(s.Scope("Dedup"), fn, keyed)
}

// newStatefulFn is the DoFn of the plan's layout and timer family for keys
// of type kt and rows of type vt.
func newStatefulFn(c *config, p *plan, kt, vt reflect.Type, metrics string) any {
	pr := step.Params{
		Rules: p.rules, Last: p.last, KeyType: beam.EncodedType{T: kt}, ValueType: beam.EncodedType{T: vt},
		KindCol: c.kindCol, OutKindCol: c.kindCol, SeqCol: c.sequenceBy, TimeCol: c.onTime, Clock: c.hooks.Clock, Dropped: p.dropped, Metrics: metrics,
		Overlap: p.overlap, Buckets: p.buckets,
	}
	names := firstNames
	if p.last {
		names = lastNames
	}
	var fn any
	switch {
	case p.buckets > 0 && p.family == core.EventTimeFamily:
		fn = &bucketsEventFn{State: state.MakeBagState[[]byte](names.buckets), Timer: timers.InEventTime(names.bucketsEvent), BucketsTimed: step.BucketsTimed{P: pr}}
	case p.buckets > 0 && p.family == core.ProcessingTimeFamily:
		fn = &bucketsProcFn{State: state.MakeBagState[[]byte](names.buckets), Timer: timers.InProcessingTime(names.bucketsProc), BucketsTimed: step.BucketsTimed{P: pr}}
	case p.buckets > 0:
		fn = &bucketsFn{State: state.MakeBagState[[]byte](names.buckets), BucketsUntimed: step.BucketsUntimed{P: pr}}
	case p.layout == marks && p.family == core.EventTimeFamily:
		fn = &marksEventFn{State: state.MakeBagState[int64](names.state), Timer: timers.InEventTime(names.event), Timed: step.Timed{P: pr}}
	case p.layout == marks && p.family == core.ProcessingTimeFamily:
		fn = &marksProcFn{State: state.MakeBagState[int64](names.state), Timer: timers.InProcessingTime(names.proc), Timed: step.Timed{P: pr}}
	case p.layout == marks:
		fn = &marksFn{State: state.MakeBagState[int64](names.state), Untimed: step.Untimed{P: pr}}
	case p.family == core.EventTimeFamily:
		fn = &versionsEventFn{State: state.MakeBagState[[]byte](names.state), Timer: timers.InEventTime(names.event), Timed: step.Timed{P: pr}}
	case p.family == core.ProcessingTimeFamily:
		fn = &versionsProcFn{State: state.MakeBagState[[]byte](names.state), Timer: timers.InProcessingTime(names.proc), Timed: step.Timed{P: pr}}
	default:
		fn = &versionsFn{State: state.MakeBagState[[]byte](names.state), Untimed: step.Untimed{P: pr}}
	}
	return fn
}

// merge builds the merge expansion (bounded input) and window dedup: key
// each row (merged within the bundle with localMerge) as a candidate, then
// merge each key's candidates with a combine the runner lifts, or with a
// GroupByKey and mergeGroupFn when the plan is grouped, or, bucketed, with
// the candidates batched per key-hash bucket (bucketFn), a GroupByKey of
// the buckets and mergeBucketFn.
func (b *builder) merge(col beam.PCollection) Result {
	p := b.p
	vt := b.sh.rowType
	merge := step.BundleMerge{Dir: p.dir, Dropped: p.dropped}
	var cands, dead, early beam.PCollection
	switch {
	case b.sh.kv:
		var keyed beam.PCollection
		keyed, dead = beam.ParDo2(b.s.Scope("Key"), b.keyPairs(), col)
		checks := b.c.rowChecks()
		cands, early = beam.ParDo2(b.s.Scope("Candidates"), &toCandidateFn{step.ToCandidate{
			ValueType: beam.EncodedType{T: vt}, KeyType: beam.EncodedType{T: b.sh.keyType}, Checks: checks, Local: p.localMerge, Merge: merge,
		}}, keyed)
	case p.expansion == windowExpansion:
		cands, dead, early = beam.ParDo3(b.s.Scope("Key"), &windowKeyFn{step.WindowKey{KeyCandidates: step.KeyCandidates{Rows: b.keyRows(), Merge: merge}}}, col)
	default:
		cands, dead, early = beam.ParDo3(b.s.Scope("Key"), &keyCandidatesFn{step.KeyCandidates{Rows: b.keyRows(), Local: p.localMerge, Merge: merge}}, col)
	}
	from := step.FromCandidate{ValueType: beam.EncodedType{T: vt}, KindCol: b.c.kindCol, Last: p.last, Metrics: b.metrics}
	out := beam.TypeDefinition{Var: beam.VType, T: vt}
	var kept, lost beam.PCollection
	switch {
	case p.bucketed:
		s := b.s.Scope("MergeBuckets")
		batches := beam.ParDo(s, &bucketFn{step.Bucket{MaxBytes: b.c.hooks.BucketBytes}}, cands)
		fn := &mergeBucketFn{step.MergeBucket{Merge: step.MergeGroup{Dir: p.dir, Dropped: p.dropped, From: from}}}
		kept, lost = beam.ParDo2(s, fn, beam.GroupByKey(s, batches), out, beam.TypeDefinition{Var: beam.TType, T: reflect.TypeFor[[]byte]()})
	case p.grouped:
		s := b.s.Scope("Merge")
		kept, lost = beam.ParDo2(s, &mergeGroupFn{step.MergeGroup{Dir: p.dir, Dropped: p.dropped, From: from}}, beam.GroupByKey(s, cands), out)
	default:
		s := b.s.Scope("Combine")
		kept = beam.ParDo(s, &fromCandidateFn{from}, beam.CombinePerKey(s, candidateMerge{step.CandidateMerge{Dir: p.dir}}, cands), out)
	}
	rows := b.dropKey("DropKey", kept)
	if !p.dropped {
		return Result{Rows: rows, DeadLetters: dead}
	}
	return b.result(rows, dead, early, b.dropKey("DropKeyDropped", lost))
}

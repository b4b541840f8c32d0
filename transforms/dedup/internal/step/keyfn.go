package step

import (
	"context"
	"reflect"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamdedup/beamdedup/coders/keycoder"
	"github.com/beamdedup/beamdedup/internal/testhook"
	"github.com/beamdedup/beamdedup/transforms/deadletter"
	"github.com/beamdedup/beamdedup/transforms/dedup/internal/core"
	"github.com/beamdedup/beamdedup/transforms/internal/rowjson"
)

// The keying step: every row enters a transform of the family here. It is
// counted (rows_in), validated (a row that cannot be processed becomes a
// dead letter with its reason), keyed by its encoded PARTITION BY columns
// (coders/keycoder) and given its event time from the OnTime column.

// KeyRows keys each row by its encoded PARTITION BY columns and sets its
// timestamp from the OnTime column.
//
// With PreFilter (KeepFirst's stateful expansion with MiniBatch) it also
// drops the rows of a key already passed on in the same bundle that can
// only be dropped by the state (core.Config.PreFilterFirstRow), as Flink's
// mini-batch deduplication does: that spares the shuffle and a state read
// each. Memory is bounded: what it remembers is cleared per bundle and at
// miniBatchMaxKeys keys.
type KeyRows struct {
	RowType   beam.EncodedType
	Columns   []string
	Checks    Columns
	UID       string
	PreFilter bool
	Rules     core.Config // the rules the pre-filter keeps to
	Clock     string
	Dropped   bool   // emit the rows the pre-filter drops
	Metrics   string // the namespace of the transform's counters

	enc    *keycoder.Encoder
	now    func(time.Time) time.Time
	seqBuf []byte
	passed map[string]*core.Passed // key -> what was passed on of it in this bundle
	m      *metricSet
}

// Emitters of the keying steps: keyed rows, dead letters and dropped rows.
type (
	keyedEmit = func(beam.EventTime, []byte, beam.T)
	deadEmit  = func(deadletter.DeadLetter)
	dropEmit  = func(beam.EventTime, beam.T)
)

// StartBundle drops what a failed bundle may have left. It takes the
// emitters only because Beam requires the emitters of ProcessElement there
// too.
func (f *KeyRows) StartBundle(_ context.Context, _ keyedEmit, _ deadEmit, _ dropEmit) {
	clear(f.passed)
}

func (f *KeyRows) Setup() error {
	enc, err := keycoder.New(f.RowType.T, f.Columns)
	if err != nil {
		return err
	}
	f.enc = enc
	f.m = newMetricSet(f.Metrics)
	f.passed = make(map[string]*core.Passed)
	if f.now, err = testhook.ResolveClock(f.Clock); err != nil {
		return err
	}
	return f.Checks.Setup(f.RowType.T)
}

// admitted is a row that passed the checks, with its key.
type admitted struct {
	checked
	key []byte
}

// admit counts a row in and validates it: a rejected row goes to dead with
// its reason. It returns the row's key (appended to dst) and what the
// checks read; the sequence value is in a buffer of f, valid until the next
// admit.
func (f *KeyRows) admit(ctx context.Context, dst []byte, ts beam.EventTime, row any, dead func(deadletter.DeadLetter)) (admitted, bool) {
	f.m.rowsIn.Inc(ctx, 1)
	v := reflect.ValueOf(row)
	c, reason := f.Checks.check(ts, v, f.seqBuf[:0])
	if reason != "" {
		f.m.deadLettered.Inc(ctx, 1)
		dead(deadletter.New(f.UID, row, reason))
		return admitted{}, false
	}
	if c.seq != nil {
		f.seqBuf = c.seq
	}
	return admitted{checked: c, key: f.enc.Append(dst, v)}, true
}

func (f *KeyRows) ProcessElement(ctx context.Context, ts beam.EventTime, row beam.T, emit keyedEmit, dead deadEmit, drop dropEmit) {
	// A fresh key slice per row: the emitted key may outlive this call.
	a, ok := f.admit(ctx, nil, ts, row, dead)
	if !ok {
		return
	}
	if f.PreFilter {
		if dropped, o := f.preFilter(a); dropped {
			f.m.miniBatchDropped.Inc(ctx, 1)
			f.m.outcomeOf(ctx, o, 1)
			if f.Dropped {
				drop(a.ts, row)
			}
			return
		}
	}
	emit(a.ts, a.key, row)
}

// preFilter decides on a row of KeepFirst's stateful expansion with what
// the bundle passed on of its key.
func (f *KeyRows) preFilter(a admitted) (bool, core.Outcome) {
	p := f.passed[string(a.key)] // no allocation for the lookup
	if p == nil {
		if len(f.passed) >= miniBatchMaxKeys {
			clear(f.passed)
		}
		p = &core.Passed{}
		f.passed[string(a.key)] = p
	}
	return f.Rules.PreFilterFirstRow(p, a.row(), f.now(a.ts.ToTime()).UnixMilli())
}

// KeyPairs prepares a KV input: canonical float keys (so -0 and 0, and all NaNs, are one key) and
// timestamps from the OnTime column.
type KeyPairs struct {
	ValueType beam.EncodedType
	KeyKind   int // reflect.Kind of the key
	Checks    Columns
	UID       string
	Metrics   string // the namespace of the transform's counters

	m *metricSet
}

func (f *KeyPairs) Setup() error {
	f.m = newMetricSet(f.Metrics)
	return f.Checks.Setup(f.ValueType.T)
}

func (f *KeyPairs) ProcessElement(ctx context.Context, ts beam.EventTime, k beam.U, v beam.V, emit func(beam.EventTime, beam.U, beam.V), dead func(deadletter.DeadLetter)) {
	f.m.rowsIn.Inc(ctx, 1)
	if f.Checks.any() {
		c, reason := f.Checks.check(ts, reflect.ValueOf(v), nil)
		if reason != "" {
			f.m.deadLettered.Inc(ctx, 1)
			dead(deadletter.DeadLetter{Row: rowjson.KV(k, v), Reason: reason, Transform: f.UID})
			return
		}
		ts = c.ts
	}
	switch reflect.Kind(f.KeyKind) {
	case reflect.Float64:
		rv := reflect.ValueOf(k)
		c := reflect.New(rv.Type()).Elem()
		c.SetFloat(keycoder.CanonicalFloat64(rv.Float()))
		k = c.Interface()
	case reflect.Float32:
		rv := reflect.ValueOf(k)
		c := reflect.New(rv.Type()).Elem()
		c.SetFloat(float64(keycoder.CanonicalFloat32(float32(rv.Float()))))
		k = c.Interface()
	}
	emit(ts, k, v)
}

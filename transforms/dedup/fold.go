package dedup

import (
	"context"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beamdedup/beamdedup/transforms/deadletter"
	"github.com/beamdedup/beamdedup/transforms/dedup/core"
)

// KeepLast's mini-batch fold (core.FoldLastRow has the rule and why it
// keeps the final state): the keying step holds each key's rows of a bundle
// and passes on only the one that decides the key's final state, at the
// bundle's end.

func init() {
	register.DoFn5x0[context.Context, beam.EventTime, beam.T, func(beam.EventTime, []byte, beam.T), func(deadletter.DeadLetter)](&foldRowsFn{})
}

// foldRowsFn is keyRowsFn for KeepLast with MiniBatch: it keys and checks
// each row as keyRowsFn does, then folds it. Its FinishBundle output lands
// in the global window, which is why it needs globally windowed input.
type foldRowsFn struct {
	Rows keyRowsFn // its Rules say how rows are ordered and grouped

	fold lastFold
}

func (f *foldRowsFn) Setup() error {
	f.fold = lastFold{cfg: f.Rows.Rules, pending: make(map[string]*foldEntry)}
	return f.Rows.Setup()
}

// StartBundle drops what a failed bundle may have left.
func (f *foldRowsFn) StartBundle(_ context.Context, _ func(beam.EventTime, []byte, beam.T), _ func(deadletter.DeadLetter)) {
	clear(f.fold.pending)
}

func (f *foldRowsFn) ProcessElement(ctx context.Context, ts beam.EventTime, row beam.T, emit func(beam.EventTime, []byte, beam.T), dead func(deadletter.DeadLetter)) {
	// A fresh key slice per row: the fold keeps it.
	a, ok := f.Rows.admit(ctx, nil, ts, row, dead)
	if !ok {
		return
	}
	f.fold.add(ctx, a, f.Rows.now(a.ts.ToTime()).UnixMilli(), row, emit)
}

// FinishBundle passes on the rows the fold holds.
func (f *foldRowsFn) FinishBundle(_ context.Context, emit func(beam.EventTime, []byte, beam.T), _ func(deadletter.DeadLetter)) {
	f.fold.flush(emit)
}

// lastFold holds each key's pending row of a bundle, at most
// miniBatchMaxKeys keys. Every row it folds away is counted as superseded
// (and minibatch_dropped).
type lastFold struct {
	cfg     core.Config
	pending map[string]*foldEntry
}

// foldEntry is a key's pending row and what passing it on needs.
type foldEntry struct {
	p   core.Fold
	key []byte
	ts  beam.EventTime
	row any
}

// add folds an admitted row (arriving at processing time now) into its
// key's entry, passing rows on through emit when a group ends or the map
// is full.
func (l *lastFold) add(ctx context.Context, a admitted, now int64, row any, emit func(beam.EventTime, []byte, beam.T)) {
	e := l.pending[string(a.key)]
	if e == nil {
		if len(l.pending) >= miniBatchMaxKeys {
			l.flush(emit)
		}
		e = &foldEntry{key: a.key}
		l.pending[string(a.key)] = e
	}
	switch l.cfg.FoldLastRow(&e.p, core.Row{Kind: a.kind, Time: int64(a.ts), Seq: a.seq}, now) {
	case core.FoldDrop:
		l.superseded(ctx)
		return
	case core.FoldReplace:
		l.superseded(ctx)
	case core.FoldFlush:
		emit(e.ts, e.key, e.row)
	}
	e.ts, e.row = a.ts, row
}

func (l *lastFold) superseded(ctx context.Context) {
	countOutcome(ctx, core.Superseded, 1)
	cMiniBatchDropped.Inc(ctx, 1)
}

// flush passes on every pending row, each with its own timestamp.
func (l *lastFold) flush(emit func(beam.EventTime, []byte, beam.T)) {
	for _, e := range l.pending {
		emit(e.ts, e.key, e.row)
	}
	clear(l.pending)
}

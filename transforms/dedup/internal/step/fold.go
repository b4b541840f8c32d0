package step

import (
	"context"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamdedup/beamdedup/transforms/dedup/internal/core"
)

// KeepLast's mini-batch fold (core.FoldLastRow has the rule and why it
// keeps the final state): the keying step holds each key's rows of a bundle
// and passes on only the one that decides the key's final state, at the
// bundle's end.

// FoldRows is KeyRows for KeepLast with MiniBatch: it keys and checks
// each row as KeyRows does, then folds it. Its FinishBundle output lands
// in the global window, which is why it needs globally windowed input.
type FoldRows struct {
	Rows KeyRows // its Rules say how rows are ordered and grouped

	fold lastFold
}

func (f *FoldRows) Setup() error {
	err := f.Rows.Setup()
	f.fold = lastFold{cfg: f.Rows.Rules, dropped: f.Rows.Dropped, pending: make(map[string]*foldEntry), m: f.Rows.m}
	return err
}

// StartBundle drops what a failed bundle may have left.
func (f *FoldRows) StartBundle(_ context.Context, _ keyedEmit, _ deadEmit, _ dropEmit) {
	clear(f.fold.pending)
}

func (f *FoldRows) ProcessElement(ctx context.Context, ts beam.EventTime, row beam.T, emit keyedEmit, dead deadEmit, drop dropEmit) {
	// A fresh key slice per row: the fold keeps it.
	a, ok := f.Rows.admit(ctx, nil, ts, row, dead)
	if !ok {
		return
	}
	f.fold.add(ctx, a, f.Rows.now(a.ts.ToTime()).UnixMilli(), row, emit, drop)
}

// FinishBundle passes on the rows the fold holds.
func (f *FoldRows) FinishBundle(_ context.Context, emit keyedEmit, _ deadEmit, _ dropEmit) {
	f.fold.flush(emit)
}

// lastFold holds each key's pending row of a bundle, at most
// miniBatchMaxKeys keys. Every row it folds away is counted as superseded
// (and minibatch_dropped), and emitted with dropped.
type lastFold struct {
	cfg     core.Config
	dropped bool
	pending map[string]*foldEntry
	m       *metricSet
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
func (l *lastFold) add(ctx context.Context, a admitted, now int64, row any, emit keyedEmit, drop dropEmit) {
	e := l.pending[string(a.key)]
	if e == nil {
		if len(l.pending) >= miniBatchMaxKeys {
			l.flush(emit)
		}
		e = &foldEntry{key: a.key}
		l.pending[string(a.key)] = e
	}
	switch l.cfg.FoldLastRow(&e.p, a.row(), now) {
	case core.FoldDrop:
		l.superseded(ctx, a.ts, row, drop)
		return
	case core.FoldReplace:
		l.superseded(ctx, e.ts, e.row, drop)
	case core.FoldFlush:
		emit(e.ts, e.key, e.row)
	}
	e.ts, e.row = a.ts, row
}

// superseded counts a row folded away, and emits it with dropped.
func (l *lastFold) superseded(ctx context.Context, ts beam.EventTime, row any, drop dropEmit) {
	l.m.outcomeOf(ctx, core.Superseded, 1)
	l.m.miniBatchDropped.Inc(ctx, 1)
	if l.dropped {
		drop(ts, row)
	}
}

// flush passes on every pending row, each with its own timestamp.
func (l *lastFold) flush(emit keyedEmit) {
	for _, e := range l.pending {
		emit(e.ts, e.key, e.row)
	}
	clear(l.pending)
}

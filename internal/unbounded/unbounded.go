// Package unbounded holds what the Go-native unbounded sources (pubsubio,
// kafkaio) share: the manual watermark estimator of their splittable
// DoFns, and the option bookkeeping of the IO packages.
package unbounded

import (
	"sync/atomic"
	"time"
)

// Watermark is a source's manual watermark estimator (Beam's
// sdf.ManualWatermarkEstimator). Its state is the watermark in Unix
// milliseconds; it only moves forward. It is safe for concurrent use: the
// SDK reads it while ProcessElement moves it.
type Watermark struct {
	ms atomic.Int64
}

// NewWatermark returns an estimator at state ms (Unix milliseconds).
func NewWatermark(ms int64) *Watermark {
	w := &Watermark{}
	w.ms.Store(ms)
	return w
}

// CurrentWatermark reports the output watermark of the reader.
func (w *Watermark) CurrentWatermark() time.Time {
	return time.UnixMilli(w.ms.Load())
}

// UpdateWatermark moves the watermark to t if t is later.
func (w *Watermark) UpdateWatermark(t time.Time) {
	ms := t.UnixMilli()
	for {
		cur := w.ms.Load()
		if ms <= cur || w.ms.CompareAndSwap(cur, ms) {
			return
		}
	}
}

// State is the estimator's state, for WatermarkEstimatorState.
func (w *Watermark) State() int64 { return w.ms.Load() }

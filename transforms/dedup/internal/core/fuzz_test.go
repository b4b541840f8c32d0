package core_test

import (
	"cmp"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/beamdedup/beamdedup/transforms/dedup/internal/core"
	"github.com/beamdedup/beamdedup/transforms/rowkind"
)

// The core, run by the runner model, against refModel: an independent and
// deliberately naive statement of KeepFirst's rules (docs/keepfirst.md, "Semantics").
//
// All times are multiples of fuzzGrain and every TTL is at most
// 100*fuzzGrain, so every refresh extends retention by at least
// TTL/RefreshFraction and refresh throttling never applies; the model has
// none (TestRule_RefreshThrottling covers it).

const fuzzGrain = 1000 // ms

// refModel keeps, per key, the phase, the candidate, when retention was
// last (re)started and the largest event time that set or refreshed it.
type refModel struct {
	cfg       core.Config
	windowEnd int64
	now, wm   int64
	keys      map[string]*refKey
	out       []emission
}

type refKey struct {
	phase      core.Phase
	cand       string
	candTime   int64
	retainFrom int64 // processing time of the emission or of the last refresh
	maxEvent   int64
}

func (m *refModel) key(k string) *refKey {
	if m.keys[k] == nil {
		m.keys[k] = &refKey{}
	}
	return m.keys[k]
}

// expiredOnArrival: an emitted key's period ends StateTTL of processing
// time after its last (re)start (inclusive), or when a row comes more than
// EventTTL after its largest event time.
func (m *refModel) expiredOnArrival(k *refKey, et int64) bool {
	if k.phase != core.Emitted {
		return false // nothing to expire; a pending candidate has no TTL
	}
	return m.cfg.StateTTL > 0 && m.now >= k.retainFrom+m.cfg.StateTTL ||
		m.cfg.EventTTL > 0 && et > k.maxEvent+m.cfg.EventTTL
}

func (m *refModel) arrive(key string, kind rowkind.Kind, et int64, row string) {
	k := m.key(key)
	if m.expiredOnArrival(k, et) {
		*k = refKey{}
	}
	insert := kind == rowkind.Insert || kind == rowkind.UpdateAfter
	switch k.phase {
	case core.None:
		switch {
		case !insert: // an unseen retraction is ignored
		case m.cfg.EventTime:
			*k = refKey{phase: core.Pending, cand: row, candTime: et}
		default:
			m.out = append(m.out, emission{Row: row, Key: key, EventTime: et, ProcTime: m.now})
			*k = refKey{phase: core.Emitted, retainFrom: m.now, maxEvent: et}
		}
	case core.Pending:
		if et < k.candTime { // strictly earlier; ties keep the first
			k.cand, k.candTime = row, et
		}
	case core.Emitted:
		if insert && !m.cfg.EventTime && m.cfg.ResetOnDuplicate { // a duplicate, not a late row
			k.retainFrom = m.now
			k.maxEvent = max(k.maxEvent, et)
		}
	}
}

// advance applies what time alone does: the watermark finalizes pending
// candidates (retention starts then) and, with cleanup timers, ends the
// periods whose largest event time plus EventTTL it passed.
func (m *refModel) advance() {
	for _, key := range slices.Sorted(func(yield func(string) bool) {
		for k := range m.keys {
			if !yield(k) {
				return
			}
		}
	}) {
		k := m.keys[key]
		if k.phase == core.Pending && k.candTime <= m.wm {
			m.out = append(m.out, emission{Row: k.cand, Key: key, EventTime: k.candTime, ProcTime: m.now})
			*k = refKey{phase: core.Emitted, retainFrom: m.now, maxEvent: k.candTime}
		}
		if k.phase == core.Emitted && m.cfg.CleanupTimers && m.cfg.EventTTL > 0 &&
			m.wm > k.maxEvent+m.cfg.EventTTL && k.maxEvent+m.cfg.EventTTL < m.windowEnd {
			*k = refKey{}
		}
	}
}

// fuzzCase is a decoded fuzz input.
type fuzzCase struct {
	cfg       core.Config
	windowEnd int64
	ops       []fuzzOp
}

type fuzzOp struct {
	op   byte // 'a' arrive, 'c' advance clock, 'w' advance watermark
	key  string
	kind rowkind.Kind
	at   int64 // event time of an arrival, or the step of an advance
}

var (
	fuzzStart = at(12, 0) // processing time
	fuzzEvent = at(10, 0) // event time origin; the watermark starts here
)

// decodeFuzzCase reads the config from the first byte and two bytes per op.
func decodeFuzzCase(data []byte) (fuzzCase, bool) {
	if len(data) < 1 {
		return fuzzCase{}, false
	}
	c := data[0]
	var fc fuzzCase
	fc.cfg = core.Config{
		EventTime:        c&1 != 0,
		CleanupTimers:    c&2 != 0,
		ResetOnDuplicate: c&4 != 0,
		StateTTL:         []int64{0, 2, 5, 10}[c>>3&3] * fuzzGrain,
		EventTTL:         []int64{0, 3, 5, 8}[c>>5&3] * fuzzGrain,
	}
	span := int64(64)
	fc.windowEnd = globalWindowEnd
	if c&128 != 0 {
		// A finite window [fuzzEvent, fuzzEvent+40s): every event time is in it.
		span = 40
		fc.windowEnd = fuzzEvent + span*fuzzGrain - 1
	}
	data = data[1:]
	for i := 0; i+1 < len(data) && len(fc.ops) < 256; i += 2 {
		a, b := data[i], data[i+1]
		switch a % 4 {
		case 0, 1:
			kind := []rowkind.Kind{rowkind.Insert, rowkind.Insert, rowkind.Insert, rowkind.Insert, rowkind.Insert, rowkind.UpdateBefore, rowkind.UpdateAfter, rowkind.Delete}[a>>4&7]
			if fc.cfg.EventTime {
				kind = rowkind.Insert // event-time mode takes insert-only input
			}
			fc.ops = append(fc.ops, fuzzOp{op: 'a', key: fmt.Sprintf("k%d", a>>2&3), kind: kind, at: fuzzEvent + int64(b)%span*fuzzGrain})
		case 2:
			fc.ops = append(fc.ops, fuzzOp{op: 'c', at: int64(b%8) * fuzzGrain})
		case 3:
			fc.ops = append(fc.ops, fuzzOp{op: 'w', at: int64(b%8) * fuzzGrain})
		}
	}
	return fc, true
}

func sortEmissions(out []emission) []emission {
	out = slices.Clone(out)
	slices.SortFunc(out, func(a, b emission) int {
		return cmp.Or(cmp.Compare(a.ProcTime, b.ProcTime), cmp.Compare(a.Key, b.Key), cmp.Compare(a.Row, b.Row))
	})
	return out
}

func FuzzCoreMatchesReferenceModel(f *testing.F) {
	// Seeds: each mode with a mix of arrivals and advances.
	mix := []byte{
		0x00, 10, 0x04, 10, 0x02, 3, 0x10, 5, 0x03, 2, 0x01, 4, 0x02, 7, 0x14, 12, 0x50, 9, 0x03, 7,
		0x60, 20, 0x02, 5, 0x70, 20, 0x00, 30, 0x03, 6, 0x02, 7, 0x08, 1, 0x00, 63, 0x02, 7, 0x00, 2,
	}
	for _, c := range []byte{0x00, 0x06, 0x0e, 0x1e, 0x2e, 0x4a, 0x7e, 0x01, 0x07, 0x0f, 0x2b, 0x6f, 0x8f, 0xaf, 0xfe, 0xff} {
		f.Add(append([]byte{c}, mix...))
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		fc, ok := decodeFuzzCase(data)
		if !ok {
			return
		}
		s := newSim(t, fc.cfg, fuzzStart)
		s.windowEnd = fc.windowEnd
		m := &refModel{cfg: fc.cfg, windowEnd: fc.windowEnd, now: fuzzStart, keys: map[string]*refKey{}}
		s.AdvanceWatermark(fuzzEvent)
		m.wm = fuzzEvent
		m.advance()

		for i, op := range fc.ops {
			switch op.op {
			case 'a':
				row := fmt.Sprintf("r%d", i)
				s.Arrive(op.key, op.kind, op.at, row)
				m.arrive(op.key, op.kind, op.at, row)
			case 'c':
				s.AdvanceClock(s.now + op.at)
				m.now = s.now
				m.advance()
			case 'w':
				wm := min(s.wm+op.at, fc.windowEnd) // the window end too, while the window still takes rows
				s.AdvanceWatermark(wm)
				m.wm = wm
				m.advance()
			}
		}
		// End of input: the watermark reaches the window end.
		s.AdvanceClock(s.now + fuzzGrain)
		s.AdvanceWatermark(fc.windowEnd)
		m.now, m.wm = s.now, fc.windowEnd
		m.advance()

		assert.Equal(t, sortEmissions(m.out), sortEmissions(s.Out()), "config %+v window end %d ops %v", fc.cfg, fc.windowEnd, fc.ops)
	})
}

package core_test

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/beamdedup/beamdedup/transforms/dedup/internal/core"
	"github.com/beamdedup/beamdedup/transforms/rowkind"
)

// KeepLast's core, run by the runner model, against lastModel: an
// independent and deliberately naive statement of KeepLast's rules 1-4
// (docs/keeplast.md, "Semantics").
// Times are multiples of fuzzGrain, so refresh throttling never applies.

type lastModel struct {
	cfg     core.Config
	now, wm int64
	keys    map[string]*lastKey
	out     []emission
}

type lastKey struct {
	has        bool
	row, seq   string
	time       int64
	retainFrom int64
	maxEvent   int64
}

func (m *lastModel) key(k string) *lastKey {
	if m.keys[k] == nil {
		m.keys[k] = &lastKey{}
	}
	return m.keys[k]
}

func (m *lastModel) emit(key, kind, row string, et int64) {
	m.out = append(m.out, emission{Row: kind + " " + row, Key: key, EventTime: et, ProcTime: m.now})
}

func (m *lastModel) store(k *lastKey, row, seq string, et int64) {
	*k = lastKey{has: true, row: row, seq: seq, time: et, retainFrom: m.now, maxEvent: et}
}

func (m *lastModel) arrive(key string, kind rowkind.Kind, et int64, seq, row string) {
	k := m.key(key)
	if k.has && (m.cfg.StateTTL > 0 && m.now >= k.retainFrom+m.cfg.StateTTL || m.cfg.EventTTL > 0 && et > k.maxEvent+m.cfg.EventTTL) {
		if m.cfg.RetractOnExpiry && k.row != "" {
			m.emit(key, "-D", k.row, et)
		}
		*k = lastKey{}
	}
	retraction := kind == rowkind.UpdateBefore || kind == rowkind.Delete
	switch {
	case k.has && m.cfg.Ordered && (seq < k.seq || seq == k.seq && et < k.time || seq == k.seq && et == k.time && k.row == "" && !retraction):
		// out of order (below the stored row or a deletion, or a live row
		// as old as a deletion): dropped
	case !k.has || k.row == "":
		switch {
		case !retraction:
			m.emit(key, "+I", row, et)
			m.store(k, row, seq, et)
		case m.cfg.Ordered: // a deletion remembers its order
			m.store(k, "", seq, et)
		}
	case retraction:
		m.emit(key, "-D", k.row, et)
		*k = lastKey{}
		if m.cfg.Ordered {
			m.store(k, "", seq, et)
		}
	case row == k.row:
		if m.cfg.Ordered { // the later identical row holds the value
			k.seq, k.time = seq, et
		}
		if m.cfg.ResetOnDuplicate {
			k.retainFrom = m.now
			k.maxEvent = max(k.maxEvent, et)
		}
	default:
		if !m.cfg.Upsert {
			m.emit(key, "-U", k.row, et)
		}
		m.emit(key, "+U", row, et)
		m.store(k, row, seq, et)
	}
}

// advance applies the cleanup timers' expiry.
func (m *lastModel) advance() {
	if !m.cfg.CleanupTimers {
		return
	}
	for _, key := range slices.Sorted(maps.Keys(m.keys)) {
		k := m.keys[key]
		if !k.has {
			continue
		}
		if m.cfg.Family() == core.ProcessingTimeFamily && m.now >= k.retainFrom+m.cfg.StateTTL ||
			m.cfg.EventTTL > 0 && m.wm > k.maxEvent+m.cfg.EventTTL {
			if m.cfg.RetractOnExpiry && k.row != "" {
				m.emit(key, "-D", k.row, k.time) // retracted at its own time
			}
			*k = lastKey{}
		}
	}
}

func FuzzLastCoreMatchesReferenceModel(f *testing.F) {
	mix := []byte{
		0x00, 10, 0x04, 10, 0x02, 3, 0x10, 5, 0x03, 2, 0x01, 4, 0x02, 7, 0x14, 12, 0x50, 9, 0x03, 7,
		0x60, 20, 0x02, 5, 0x70, 20, 0x00, 30, 0x03, 6, 0x02, 7, 0x08, 1, 0x00, 63, 0x02, 7, 0x00, 2,
	}
	for _, c := range []uint16{0x000, 0x006, 0x00e, 0x01e, 0x02e, 0x04a, 0x07e, 0x101, 0x187, 0x20f, 0x32b, 0x36f, 0x08f, 0x1af, 0x3fe, 0x3ff} {
		f.Add(append([]byte{byte(c), byte(c >> 8)}, mix...))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 2 {
			return
		}
		c := uint16(data[0]) | uint16(data[1])<<8
		cfg := core.Config{
			Ordered:          c&1 != 0,
			CleanupTimers:    c&2 != 0,
			ResetOnDuplicate: c&4 != 0,
			StateTTL:         []int64{0, 2, 5, 10}[c>>3&3] * fuzzGrain,
			EventTTL:         []int64{0, 3, 5, 8}[c>>5&3] * fuzzGrain,
			Upsert:           c&128 != 0,
			RetractOnExpiry:  c&256 != 0,
		}
		seqs := c&512 != 0
		s := newSim(t, cfg, fuzzStart)
		m := &lastModel{cfg: cfg, now: fuzzStart, keys: map[string]*lastKey{}}
		s.AdvanceWatermark(fuzzEvent)
		m.wm = fuzzEvent
		data = data[2:]
		for i := 0; i+1 < len(data) && i < 512; i += 2 {
			a, b := data[i], data[i+1]
			switch a % 4 {
			case 0, 1:
				kind := []rowkind.Kind{rowkind.Insert, rowkind.Insert, rowkind.Insert, rowkind.UpdateAfter, rowkind.UpdateAfter, rowkind.UpdateBefore, rowkind.Delete, rowkind.Insert}[a>>4&7]
				key := fmt.Sprintf("k%d", a>>2&3)
				et := fuzzEvent + int64(b)%64*fuzzGrain
				seq := ""
				if seqs {
					seq = string(rune('a' + b%5))
				}
				row := fmt.Sprintf("r%d", b%6) // few distinct rows: identical resends happen
				s.ArriveLast(key, kind, et, seq, row)
				m.arrive(key, kind, et, seq, row)
			case 2:
				s.AdvanceClock(s.now + int64(b%8)*fuzzGrain)
				m.now = s.now
				m.advance()
			case 3:
				s.AdvanceWatermark(s.wm + int64(b%8)*fuzzGrain)
				m.wm = s.wm
				m.advance()
			}
		}
		// Timers of different keys due at once fire in the runner's order;
		// each key's own emissions keep theirs.
		byKey := func(out []emission) []emission {
			out = slices.Clone(out)
			slices.SortStableFunc(out, func(a, b emission) int { return cmp.Or(cmp.Compare(a.ProcTime, b.ProcTime), cmp.Compare(a.Key, b.Key)) })
			return out
		}
		assert.Equal(t, byKey(m.out), byKey(s.Out()), "config %+v seqs %v", cfg, seqs)
	})
}

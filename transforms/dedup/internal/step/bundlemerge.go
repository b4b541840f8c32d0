package step

import (
	"bytes"
	"cmp"
	"fmt"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"

	"github.com/beamdedup/beamdedup/internal/rowcol"
	"github.com/beamdedup/beamdedup/transforms/dedup/internal/core"
)

// BundleMerge does the combine's work within a bundle (MiniBatch on
// bounded, globally windowed input): it keeps each key's best row unencoded
// in a map, merged exactly as Direction.Merge would merge it, and hands out
// one candidate per key when the bundle ends or the map is full. That
// spares the encoding of every row that loses within its bundle, a
// candidate per row through the lifted combine, whose cache holds only
// 2,000 keys, and so most of the shuffle. With Dropped it emits every row
// that loses, and every retraction KeepFirst only counts.
type BundleMerge struct {
	MaxKeys int            // keys held per bundle before a flush; 0: miniBatchMaxKeys
	Dir     core.Direction // which row per key is kept
	Dropped bool           // emit the rows that lose (OutputDropped)

	rows rowEncoder
	best map[string]*localBest
	tie  bytes.Buffer
}

// localBest is a key's best row within a bundle, as a candidate whose row
// is encoded only when needed (a tie, or the flush).
type localBest struct {
	c   candidate // Row is nil until encoded
	row any
	key any            // the key to emit, when it is not the map key
	ts  beam.EventTime // element time for the flush
}

func (m *BundleMerge) setup(rowType reflect.Type) {
	m.rows.enc = beam.NewElementEncoder(rowType)
	m.best = make(map[string]*localBest)
}

// single is the candidate of one checked row (core.Direction.One); its
// sequence value is copied. A retraction KeepFirst only counts goes to
// drop with Dropped; its candidate still carries its count.
func (m *BundleMerge) single(c checked, row any, drop func(beam.EventTime, any)) (candidate, error) {
	r := c.row()
	if c.kind.IsRetraction() && m.Dir == core.KeepFirst {
		if m.Dropped {
			drop(c.ts, row)
		}
		return m.Dir.One(r), nil // only counted: no need to encode it
	}
	enc, err := m.rows.encode(row)
	if err != nil {
		return candidate{}, err
	}
	r.Seq, r.Row = bytes.Clone(c.seq), enc
	return m.Dir.One(r), nil
}

// add merges a checked row of key (element time ts) into the key's entry;
// a new key first flushes a full map. Its sequence value is copied when
// kept. With Dropped the row that loses goes to drop.
func (m *BundleMerge) add(key []byte, emitKey any, ts beam.EventTime, c checked, row any, flush func() error, drop func(beam.EventTime, any)) error {
	b := m.best[string(key)] // no allocation for the lookup
	if b == nil {
		if len(m.best) >= cmp.Or(m.MaxKeys, miniBatchMaxKeys) {
			if err := flush(); err != nil {
				return err
			}
		}
		b = &localBest{key: emitKey, ts: ts}
		m.best[string(key)] = b
	}
	retraction := c.kind.IsRetraction()
	if retraction {
		b.c.Retractions++
		if m.Dir == core.KeepFirst {
			if m.Dropped {
				drop(c.ts, row)
			}
			return nil // only counted: a retraction never becomes the first row
		}
	} else {
		b.c.Rows++
	}
	better, err := m.beats(b, c.row().Order(), row)
	if err != nil {
		return err
	}
	if !better {
		if m.Dropped {
			drop(c.ts, row)
		}
		return nil
	}
	if m.Dropped && b.c.Has {
		drop(mtime.Time(b.c.TS), b.row)
	}
	b.c.Has, b.c.Retract, b.c.TS, b.c.Micros, b.c.Stamped, b.row, b.ts = true, retraction, int64(c.ts), c.micros, !c.onTime, row, ts
	b.c.Seq = append(b.c.Seq[:0], c.seq...)
	if c.seq == nil {
		b.c.Seq = nil
	}
	if m.tie.Len() > 0 { // the tie-break encoded it: keep that
		b.c.Row = bytes.Clone(m.tie.Bytes())
	} else {
		b.c.Row = nil
	}
	return nil
}

// beats reports whether a row of order o is kept over b's, by
// core.CompareMerged: the order first, then the encoded rows, which are
// encoded only on a tie, leaving the new row's encoding in m.tie.
func (m *BundleMerge) beats(b *localBest, o rowcol.Order, row any) (bool, error) {
	m.tie.Reset()
	if !b.c.Has {
		return true, nil
	}
	if c := o.Compare(b.c.Order()); c != 0 {
		return m.Dir.Prefers(c), nil
	}
	if b.c.Row == nil {
		enc, err := m.rows.encode(b.row)
		if err != nil {
			return false, err
		}
		b.c.Row = enc
	}
	if err := m.rows.enc.Encode(row, &m.tie); err != nil {
		return false, fmt.Errorf("dedup: encoding row: %w", err)
	}
	return m.Dir.Prefers(bytes.Compare(m.tie.Bytes(), b.c.Row)), nil
}

// drain passes each key's candidate to emit and empties the map.
func (m *BundleMerge) drain(emit func(key string, b *localBest)) error {
	for k, b := range m.best {
		if b.c.Has && b.c.Row == nil {
			enc, err := m.rows.encode(b.row)
			if err != nil {
				return err
			}
			b.c.Row = enc
		}
		emit(k, b)
	}
	clear(m.best)
	return nil
}

// rowEncoder makes one-row candidates.
type rowEncoder struct {
	enc beam.ElementEncoder
	buf bytes.Buffer
}

// encode returns row's encoding (the merge's tie-break and its shuffle
// form), a fresh slice.
func (r *rowEncoder) encode(row any) ([]byte, error) {
	r.buf.Reset()
	if err := r.enc.Encode(row, &r.buf); err != nil {
		return nil, fmt.Errorf("dedup: encoding row: %w", err)
	}
	return bytes.Clone(r.buf.Bytes()), nil
}

package step

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"

	"github.com/beamdedup/beamdedup/transforms/dedup/internal/core"
	"github.com/beamdedup/beamdedup/transforms/dedup/internal/statecoder"
)

// State per key-hash bucket: the layout in which a stateful step keeps the
// states of all the keys of a bucket (a hash of the key, bucketOf) in one
// cell, a bag of segments (statecoder's buckets), rather than a cell per
// key. A bundle reads a bucket's cell once, decides each of the bucket's
// rows on the bucket's table, and writes what changed as one segment (one
// per MiB of changes): a get and two appends per bucket and bundle, where
// the per-key layout makes a get per key and an append per new key. What
// it costs instead is
// reading the whole bucket: all its keys' states, for however few rows of
// it a bundle holds (docs/state.md).

const (
	// maxSegments is how many segments a bucket's cell holds before the
	// next write rewrites it.
	maxSegments = 64
	// maxSegmentBytes caps a segment (a state request's payload): a
	// larger write, a bucket's first or its rewrite, is several.
	maxSegmentBytes = 1 << 20
	// maxTableEntries bounds the keys a step holds in its bundle's tables:
	// past it, the tables are written and forgotten, and read again if a
	// later element needs them.
	maxTableEntries = 1_000_000
)

// bucketKey is the key of bucket b's state: its number, 4 bytes big-endian.
func bucketKey(b uint32) []byte { return binary.BigEndian.AppendUint32(nil, b) }

// bucketEntry is a key's state in its bucket's table: encoded (what its
// segment holds, statecoder.Append), decoded when a row or a firing of
// the key needs it; and its pending timer. An entry without state is a key
// deleted since the cell was last written: its deletion is written next.
type bucketEntry struct {
	key   string // the table's key of the entry, converted once
	st    []byte
	timer core.Timer
	dirty bool // changed since the cell was last written
}

// bucketTable is a bucket's keys as its cell holds them, plus what the
// bundle changed: its decisions read and write here, and the changes go to
// the cell in one write (write).
type bucketTable struct {
	key     []byte // the bucket's state key
	buckets int
	entries map[string]*bucketEntry
	dirty   []*bucketEntry // the entries changed since the cell was last written
	// slab holds the entries, allocated a chunk at a time
	slab []bucketEntry
	// what the cell holds: its segments, the next one's position, and the
	// bytes at position 0 (the last rewrite) and after it
	segments    int
	next        uint64
	base, delta int
	// sp is the provider the table's deferred write goes through: the
	// latest element's of the bucket in the bundle.
	sp state.Provider
	// timers: the entries' pending timers by time (lazily: an item whose
	// entry no longer has that timer is dropped when it comes up); the
	// bucket's own timers as the step set them (bucketstep.go, arm): in
	// processing time one, at armed, in event time one at each time an
	// entry's timer is or was at, in times; and the times entries' timers
	// were set to since the bucket's timers were last set
	due      timerHeap
	armed    int64
	hasArmed bool
	times    map[int64]bool
	newTimes []int64
	// arena holds the states put since the read, so that a put does not
	// allocate for each key
	arena []byte
}

// foldBucket reads a bucket's segments into a table: each key's entry of
// the largest position.
func foldBucket(segs [][]byte, buckets int) (*bucketTable, error) {
	t := &bucketTable{buckets: buckets, entries: make(map[string]*bucketEntry)}
	held, err := statecoder.FoldSegments(segs, buckets, func(e *statecoder.Entry) {
		en := t.entries[string(e.Key)]
		if len(e.State) == 0 {
			if en != nil {
				delete(t.entries, en.key)
			}
			return
		}
		if en == nil {
			en = t.add(string(e.Key))
		}
		en.st, en.timer = e.State, timerOf(e.Timer, e.At)
	})
	if err != nil {
		return nil, err
	}
	t.segments, t.next, t.base, t.delta = held.Segments, held.Next, held.Base, held.Delta
	for k, en := range t.entries {
		if en.timer.Kind != core.NoTimer {
			t.due = append(t.due, dueItem{at: en.timer.At, key: k})
		}
	}
	t.due.init()
	if at, ok := t.nextDue(); ok {
		// The bucket's timer is set at or before its earliest entry's: the
		// step sets it whenever an entry's timer comes before it.
		t.armed, t.hasArmed = at, true
	}
	t.times = make(map[int64]bool, len(t.due))
	for _, d := range t.due {
		t.times[d.at] = true // each entry's time has its timer
	}
	return t, nil
}

// add is a new entry of the key, without state.
func (t *bucketTable) add(key string) *bucketEntry {
	if len(t.slab) == cap(t.slab) {
		// chunks from 16 entries to 1024, doubling: a small bucket's table
		// stays small, a large one's costs an allocation per 1024 keys
		t.slab = make([]bucketEntry, 0, min(max(2*cap(t.slab), 16), 1024))
	}
	t.slab = append(t.slab, bucketEntry{key: key})
	en := &t.slab[len(t.slab)-1]
	t.entries[key] = en
	return en
}

// changed marks the entry written by the next write.
func (t *bucketTable) changed(en *bucketEntry) {
	if !en.dirty {
		en.dirty = true
		t.dirty = append(t.dirty, en)
	}
}

// timerOf is a persisted timer as the rules name it.
func timerOf(kind byte, at int64) core.Timer {
	switch kind {
	case statecoder.FinalizeTimer:
		return core.Timer{Kind: core.Finalize, At: at}
	case statecoder.CleanupTimer:
		return core.Timer{Kind: core.Cleanup, At: at}
	}
	return core.Timer{}
}

// persistedTimer is a timer as its entry persists it.
func persistedTimer(t core.Timer) byte {
	switch t.Kind {
	case core.Finalize:
		return statecoder.FinalizeTimer
	case core.Cleanup:
		return statecoder.CleanupTimer
	}
	return statecoder.NoTimer
}

// get is the state of the key called id.
func (t *bucketTable) get(id []byte) (stored, error) {
	en := t.entries[string(id)]
	if en == nil || len(en.st) == 0 {
		return stored{}, nil
	}
	var st core.State
	if err := statecoder.Decode(en.st, &st); err != nil {
		return stored{}, err
	}
	return stored{st: st}, nil
}

// put records st as the key's state (encoded: st's rows may be scratch
// buffers); a key whose state is gone loses its state, and its timer with
// it (a firing would find no state, and do nothing).
func (t *bucketTable) put(id []byte, st *core.State) {
	en := t.entries[string(id)]
	if en == nil {
		en = t.add(string(id))
	}
	t.changed(en)
	if st.Phase == core.None {
		en.st, en.timer = nil, core.Timer{}
		return
	}
	if cap(t.arena)-len(t.arena) < 256 {
		t.arena = make([]byte, 0, 64<<10)
	}
	n := len(t.arena)
	t.arena = statecoder.Append(t.arena, st)
	en.st = t.arena[n:len(t.arena):len(t.arena)]
}

// setTimer records the key's pending timer: the one its latest decision
// set. A key without state has none.
func (t *bucketTable) setTimer(id []byte, tm core.Timer) {
	en := t.entries[string(id)]
	if en == nil || len(en.st) == 0 || en.timer == tm {
		return
	}
	en.timer = tm
	t.changed(en)
	if tm.Kind != core.NoTimer {
		t.due.push(dueItem{at: tm.At, key: en.key})
		t.newTimes = append(t.newTimes, tm.At)
	}
}

// nextDue is the earliest pending timer of the bucket's keys.
func (t *bucketTable) nextDue() (int64, bool) {
	for len(t.due) > 0 {
		d := t.due[0]
		if en := t.entries[d.key]; en != nil && en.timer.Kind != core.NoTimer && en.timer.At == d.at {
			return d.at, true
		}
		t.due.pop() // its key's timer moved, or the key is gone
	}
	return 0, false
}

// popDue takes the earliest key whose timer is at or before at, its timer
// consumed by the firing.
func (t *bucketTable) popDue(at int64) (key string, tm core.Timer, ok bool) {
	next, ok := t.nextDue()
	if !ok || next > at {
		return "", core.Timer{}, false
	}
	en := t.entries[t.due.pop().key]
	tm, en.timer = en.timer, core.Timer{}
	t.changed(en)
	return en.key, tm, true
}

// write is the change that writes what the bundle changed: the dirty keys
// (in key order) at the cell's next position, in segments of at most
// maxSegmentBytes, or, when the cell would hold too many segments or more
// bytes of changes than of its last rewrite, the whole bucket rewritten.
// It counts the write's requests and leaves the table as the cell is after
// it.
func (t *bucketTable) write(ctx context.Context, m *metricSet) change {
	if len(t.dirty) == 0 {
		return change{}
	}
	slices.SortFunc(t.dirty, byKey)
	segs, n := t.segmentsOf(t.dirty, t.next)
	t.written()
	m.stateWrites.Inc(ctx, 1)
	if t.segments > 0 && (t.segments+len(segs) > maxSegments || t.delta+n > t.base) {
		return t.rewrite(ctx, m)
	}
	if t.segments == 0 {
		t.base += n
	} else {
		t.delta += n
	}
	t.segments += len(segs)
	t.next++
	m.stateAppends.Inc(ctx, int64(len(segs)*appendsPerVersion))
	return change{segments: segs}
}

// rewrite is the change that clears the bucket's cell and writes every
// live key at position 0, in segments of at most maxSegmentBytes. The
// table has no deletion left to write.
func (t *bucketTable) rewrite(ctx context.Context, m *metricSet) change {
	t.written()
	live := make([]*bucketEntry, 0, len(t.entries))
	for _, en := range t.entries {
		live = append(live, en)
	}
	slices.SortFunc(live, byKey)
	c := change{clear: true}
	c.segments, t.base = t.segmentsOf(live, 0)
	t.segments, t.next, t.delta = len(c.segments), 1, 0
	if len(c.segments) == 0 {
		t.next = 0 // the next segment starts the bucket anew
	}
	m.stateClears.Inc(ctx, clearsPerClear)
	m.stateAppends.Inc(ctx, int64(len(c.segments)*appendsPerVersion))
	return c
}

// written forgets the changes, as written: no entry is dirty, and the
// deleted keys' entries are gone.
func (t *bucketTable) written() {
	for _, en := range t.dirty {
		en.dirty = false
		if len(en.st) == 0 {
			delete(t.entries, en.key)
		}
	}
	clear(t.dirty)
	t.dirty = t.dirty[:0]
}

func byKey(a, b *bucketEntry) int { return strings.Compare(a.key, b.key) }

// segmentsOf is the entries (a deletion for one without state) in
// segments at position pos, each of at most maxSegmentBytes (a state
// request's payload) unless a single entry is larger, and their bytes. A
// key's entry is current in whichever of them it is: a fold reads segments
// of one position in any order.
func (t *bucketTable) segmentsOf(entries []*bucketEntry, pos uint64) (segs [][]byte, n int) {
	var seg []byte
	header := len(statecoder.AppendSegmentHeader(nil, pos, t.buckets))
	for _, en := range entries {
		if seg == nil {
			seg = statecoder.AppendSegmentHeader(nil, pos, t.buckets)
		}
		end := len(seg)
		e := statecoder.Entry{Key: []byte(en.key), State: en.st}
		if len(en.st) > 0 {
			e.Timer, e.At = persistedTimer(en.timer), en.timer.At
		}
		seg = statecoder.AppendEntry(seg, &e)
		if len(seg) > maxSegmentBytes && end > header {
			// The entry starts the next segment.
			next := statecoder.AppendSegmentHeader(make([]byte, 0, header+len(seg)-end), pos, t.buckets)
			next = append(next, seg[end:]...)
			segs, seg = append(segs, seg[:end:end]), next
		}
	}
	if seg != nil {
		segs = append(segs, seg)
	}
	for _, s := range segs {
		n += len(s)
	}
	return segs, n
}

// dueItem is a key's timer in the bucket's due heap.
type dueItem struct {
	at  int64
	key string
}

// timerHeap orders the bucket's timers by time, then key: a binary heap,
// typed, so that a push does not box its item.
type timerHeap []dueItem

func (h timerHeap) less(i, j int) bool {
	return h[i].at < h[j].at || h[i].at == h[j].at && h[i].key < h[j].key
}

func (h timerHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *timerHeap) push(d dueItem) {
	*h = append(*h, d)
	h.up(len(*h) - 1)
}

// pop removes and returns the earliest item.
func (h *timerHeap) pop() dueItem {
	old := *h
	d, last := old[0], len(old)-1
	old[0], old[last] = old[last], dueItem{}
	*h = old[:last]
	h.down(0)
	return d
}

func (h timerHeap) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !h.less(i, parent) {
			return
		}
		h[i], h[parent] = h[parent], h[i]
		i = parent
	}
}

func (h timerHeap) down(i int) {
	for {
		least := i
		if l := 2*i + 1; l < len(h) && h.less(l, least) {
			least = l
		}
		if r := 2*i + 2; r < len(h) && h.less(r, least) {
			least = r
		}
		if least == i {
			return
		}
		h[i], h[least] = h[least], h[i]
		i = least
	}
}

// bucketStore is the cell of a bucket's segments, a Bag[[]byte].
type bucketStore struct {
	cell    *state.Bag[[]byte]
	buckets int
}

func (b bucketStore) fetch(sp state.Provider) (stored, error) {
	segs, _, err := b.cell.Read(sp)
	if err != nil {
		return stored{}, fmt.Errorf("dedup: reading a bucket's state: %w", err)
	}
	t, err := foldBucket(segs, b.buckets)
	if err != nil {
		return stored{}, fmt.Errorf("dedup: reading a bucket's state: %w", err)
	}
	return stored{table: t}, nil
}

func (b bucketStore) apply(sp state.Provider, c change) error {
	if c.clear {
		if err := b.cell.Clear(sp); err != nil {
			return fmt.Errorf("dedup: clearing a bucket's state: %w", err)
		}
	}
	for _, s := range c.segments {
		if err := b.cell.Add(sp, s); err != nil {
			return fmt.Errorf("dedup: writing a bucket's state: %w", err)
		}
	}
	return nil
}

// BucketKey is the state key of the bucket of a row's key, among buckets
// (for the library's tests, which look into a bucket's cell).
func BucketKey(key []byte, buckets int) []byte { return bucketKey(bucketOf(key, buckets)) }

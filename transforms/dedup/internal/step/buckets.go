package step

import (
	"container/heap"
	"context"
	"encoding/binary"
	"fmt"
	"slices"

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
// the key needs it; and its pending timer.
type bucketEntry struct {
	st    []byte
	timer core.Timer
}

// bucketTable is a bucket's keys as its cell holds them, plus what the
// bundle changed: its decisions read and write here, and the changes go to
// the cell in one write (write).
type bucketTable struct {
	key     []byte // the bucket's state key
	buckets int
	entries map[string]bucketEntry
	dirty   map[string]bool // keys changed since the cell was last written
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
	t := &bucketTable{buckets: buckets, entries: make(map[string]bucketEntry), dirty: make(map[string]bool)}
	held, err := statecoder.FoldSegments(segs, buckets, func(e *statecoder.Entry) {
		if len(e.State) == 0 {
			delete(t.entries, string(e.Key))
			return
		}
		t.entries[string(e.Key)] = bucketEntry{st: e.State, timer: timerOf(e.Timer, e.At)}
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
	heap.Init(&t.due)
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
	en, ok := t.entries[string(id)]
	if !ok {
		return stored{}, nil
	}
	var st core.State
	if err := statecoder.Decode(en.st, &st); err != nil {
		return stored{}, err
	}
	return stored{st: st}, nil
}

// put records st as the key's state (encoded: st's rows may be scratch
// buffers); a key whose state is gone loses its entry, and its timer with
// it (a firing would find no state, and do nothing).
func (t *bucketTable) put(id []byte, st *core.State) {
	t.dirty[string(id)] = true
	if st.Phase == core.None {
		delete(t.entries, string(id))
		return
	}
	if cap(t.arena)-len(t.arena) < 256 {
		t.arena = make([]byte, 0, 64<<10)
	}
	n := len(t.arena)
	t.arena = statecoder.Append(t.arena, st)
	b := t.arena[n:len(t.arena):len(t.arena)]
	en := t.entries[string(id)]
	en.st = b
	t.entries[string(id)] = en
}

// setTimer records the key's pending timer: the one its latest decision
// set. A key without state has none.
func (t *bucketTable) setTimer(id []byte, tm core.Timer) {
	en, ok := t.entries[string(id)]
	if !ok || en.timer == tm {
		return
	}
	en.timer = tm
	t.entries[string(id)] = en
	t.dirty[string(id)] = true
	if tm.Kind != core.NoTimer {
		heap.Push(&t.due, dueItem{at: tm.At, key: string(id)})
		t.newTimes = append(t.newTimes, tm.At)
	}
}

// nextDue is the earliest pending timer of the bucket's keys.
func (t *bucketTable) nextDue() (int64, bool) {
	for len(t.due) > 0 {
		d := t.due[0]
		if en, ok := t.entries[d.key]; ok && en.timer.Kind != core.NoTimer && en.timer.At == d.at {
			return d.at, true
		}
		heap.Pop(&t.due) // its key's timer moved, or the key is gone
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
	d := heap.Pop(&t.due).(dueItem)
	en := t.entries[d.key]
	tm, en.timer = en.timer, core.Timer{}
	t.entries[d.key] = en
	t.dirty[d.key] = true
	return d.key, tm, true
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
	keys := make([]string, 0, len(t.dirty))
	for k := range t.dirty {
		keys = append(keys, k)
	}
	clear(t.dirty)
	slices.Sort(keys)
	segs, n := t.segmentsOf(keys, t.next)
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
// live key at position 0, in segments of at most maxSegmentBytes.
func (t *bucketTable) rewrite(ctx context.Context, m *metricSet) change {
	keys := make([]string, 0, len(t.entries))
	for k := range t.entries {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	c := change{clear: true}
	c.segments, t.base = t.segmentsOf(keys, 0)
	t.segments, t.next, t.delta = len(c.segments), 1, 0
	if len(c.segments) == 0 {
		t.next = 0 // the next segment starts the bucket anew
	}
	m.stateClears.Inc(ctx, clearsPerClear)
	m.stateAppends.Inc(ctx, int64(len(c.segments)*appendsPerVersion))
	return c
}

// segmentsOf is the keys' entries in segments at position pos, each of at
// most maxSegmentBytes (a state request's payload) unless a single entry
// is larger, and their bytes. A key's entries are current in whichever of
// them it is: a fold reads segments of one position in any order.
func (t *bucketTable) segmentsOf(keys []string, pos uint64) (segs [][]byte, n int) {
	var seg []byte
	header := len(statecoder.AppendSegmentHeader(nil, pos, t.buckets))
	for _, k := range keys {
		if seg == nil {
			seg = statecoder.AppendSegmentHeader(nil, pos, t.buckets)
		}
		end := len(seg)
		seg = t.appendEntry(seg, k)
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

// appendEntry appends the key's entry (a deletion if it has none) to seg.
func (t *bucketTable) appendEntry(seg []byte, key string) []byte {
	e := statecoder.Entry{Key: []byte(key)}
	if en, ok := t.entries[key]; ok {
		e.State, e.Timer, e.At = en.st, persistedTimer(en.timer), en.timer.At
	}
	return statecoder.AppendEntry(seg, &e)
}

// dueItem is a key's timer in the bucket's due heap.
type dueItem struct {
	at  int64
	key string
}

// timerHeap orders the bucket's timers by time, then key.
type timerHeap []dueItem

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	return h[i].at < h[j].at || h[i].at == h[j].at && h[i].key < h[j].key
}
func (h timerHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)   { *h = append(*h, x.(dueItem)) }
func (h *timerHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
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

package step

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"reflect"
	"slices"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"

	"github.com/beamdedup/beamdedup/transforms/dedup/internal/core"
	"github.com/beamdedup/beamdedup/transforms/dedup/internal/statecoder"
)

// How a stateful step keeps a key's core.State in its state cell, and what
// that costs. On a portable runner every state access of a Go DoFn is a
// synchronous Fn API request to the runner (about 40 µs on Prism, whatever
// it carries), and the Go SDK caches no user state across elements
// (harness/statecache/statecache.go SetValidTokens skips user-state cache
// tokens). So the cost of the step is its requests, counted here per SDK
// call, Beam Go v2.77.0:
//
//   - Bag.Read is one get (exec/userstate.go ReadBagState, through
//     harness/statemgr.go stateKeyReader: one StateGetRequest; a
//     continuation token would add one, which a key's few bytes never need).
//   - Bag.Clear is one clear (exec/userstate.go ClearBagState: one Write on
//     the clearer).
//   - Bag[int64].Add is one append (exec/userstate.go WriteBagState encodes
//     with graph/coder/varint.go EncodeVarInt, one Write, and
//     harness/statemgr.go stateKeyWriter.Write sends one request per Write).
//   - Bag[[]byte].Add is two appends (graph/coder/bytes.go EncodeBytes: the
//     length, then the bytes).
//
// A Value[[]byte] write would be a clear and two appends, which is why no
// step uses one. TestEachSDKCallCostsTheRequestsTheStoresCount (in
// testing/bench, with its state request counter) checks these costs
// against the requests the SDK sends, and the budget tests the counters of
// every mode.

// Requests per SDK call, from the list above.
const (
	getsPerRead       = 1
	appendsPerMark    = 1
	appendsPerVersion = 2
	clearsPerClear    = 1
)

// read counts a read of a key's state.
func (m *metricSet) read(ctx context.Context) {
	m.stateReads.Inc(ctx, 1)
	m.stateGets.Inc(ctx, getsPerRead)
}

// stored is a key's state as its cell holds it, with what writing it back
// needs: the marks, or how many versions the bag holds; or, read from a
// bucket's cell, the bucket's table (buckets.go).
type stored struct {
	st       core.State
	marks    []int64
	versions int
	table    *bucketTable
}

// cell makes a step's state requests through an element's provider: a
// read of the cell, and a change. Its methods touch nothing but the
// provider, so that the step may make them apart from the DoFn's goroutine
// (overlap.go).
type cell interface {
	// fetch reads the cell through sp.
	fetch(sp state.Provider) (stored, error)
	// apply makes a change's requests through sp, in order: the clear,
	// then the appends.
	apply(sp state.Provider, c change) error
}

// Store keeps a key's core.State in a stateful step's state cell, in one of
// statecoder's layouts (Marks, Versions). Its requests are the cell's;
// plan, on the DoFn's goroutine, works out and counts a write.
type Store interface {
	cell
	// plan works out the change that stores st, which the key's state
	// became since it was read as was, counts its requests, and returns
	// it with what the cell holds after it (its own copy).
	plan(ctx context.Context, m *metricSet, was *stored, st *core.State) (change, stored, error)
}

// change is a write of a state cell: a clear (the rewrite, or a
// deletion), then the marks, the version or a bucket's segments to
// append.
type change struct {
	clear    bool
	marks    []int64
	version  []byte   // fresh: the runner may keep it
	segments [][]byte // fresh too
}

// none reports whether the change makes no request.
func (c change) none() bool {
	return !c.clear && len(c.marks) == 0 && c.version == nil && len(c.segments) == 0
}

// Marks is the Store of marks in the DoFn's cell, a Bag[int64].
func Marks(cell *state.Bag[int64]) Store { return marksStore{cell} }

// Versions is the Store of versions in the DoFn's cell, a Bag[[]byte].
func Versions(cell *state.Bag[[]byte]) Store { return versionsStore{cell} }

// marksStore keeps the state as marks in a Bag[int64].
type marksStore struct{ cell *state.Bag[int64] }

func (ms marksStore) fetch(sp state.Provider) (stored, error) {
	marks, _, err := ms.cell.Read(sp)
	if err != nil {
		return stored{}, fmt.Errorf("dedup: reading state: %w", err)
	}
	st, err := statecoder.FoldMarks(marks)
	return stored{st: st, marks: marks}, err
}

func (ms marksStore) plan(ctx context.Context, m *metricSet, was *stored, st *core.State) (change, stored, error) {
	clear, add, err := statecoder.MarkChanges(was.marks, &was.st, st)
	if err != nil {
		return change{}, stored{}, err
	}
	m.stateWrites.Inc(ctx, 1)
	marks := was.marks
	if clear {
		m.stateClears.Inc(ctx, clearsPerClear)
		marks = nil
	}
	m.stateAppends.Inc(ctx, int64(len(add)*appendsPerMark))
	return change{clear: clear, marks: add}, stored{st: *st, marks: slices.Concat(marks, add)}, nil
}

func (ms marksStore) apply(sp state.Provider, c change) error {
	if c.clear {
		if err := ms.cell.Clear(sp); err != nil {
			return fmt.Errorf("dedup: clearing state: %w", err)
		}
	}
	for _, mk := range c.marks {
		if err := ms.cell.Add(sp, mk); err != nil {
			return fmt.Errorf("dedup: writing state: %w", err)
		}
	}
	return nil
}

// versionsStore keeps the state as versions in a Bag[[]byte].
type versionsStore struct{ cell *state.Bag[[]byte] }

func (v versionsStore) fetch(sp state.Provider) (stored, error) {
	vs, _, err := v.cell.Read(sp)
	if err != nil {
		return stored{}, fmt.Errorf("dedup: reading state: %w", err)
	}
	st, err := statecoder.LastVersion(vs)
	return stored{st: st, versions: len(vs)}, err
}

func (v versionsStore) plan(ctx context.Context, m *metricSet, was *stored, st *core.State) (change, stored, error) {
	clear, add := statecoder.VersionChanges(was.versions, st)
	m.stateWrites.Inc(ctx, 1)
	held := was.versions
	if clear {
		m.stateClears.Inc(ctx, clearsPerClear)
		held = 0
	}
	if add == nil {
		return change{clear: clear}, stored{versions: held}, nil
	}
	m.stateAppends.Inc(ctx, appendsPerVersion)
	kept := *st // st's rows may be scratch buffers
	kept.Cand, kept.Seq = bytes.Clone(st.Cand), bytes.Clone(st.Seq)
	return change{clear: clear, version: add}, stored{st: kept, versions: held + 1}, nil
}

func (v versionsStore) apply(sp state.Provider, c change) error {
	if c.clear {
		if err := v.cell.Clear(sp); err != nil {
			return fmt.Errorf("dedup: clearing state: %w", err)
		}
	}
	if c.version == nil {
		return nil
	}
	if err := v.cell.Add(sp, c.version); err != nil {
		return fmt.Errorf("dedup: writing state: %w", err)
	}
	return nil
}

// bundleCache keeps the state of the keys a bundle read or wrote, so that a
// key's later rows (and timers) in the same bundle need no read: within a
// bundle no one but this DoFn changes a key's state, and the Go SDK caches
// no user state across elements (harness/statecache/statecache.go). It is
// cleared at every bundle's start, and when it holds max keys.
type bundleCache struct {
	keyEnc beam.ElementEncoder // for keys that are not []byte (KV input)
	states map[string]stored
	max    int // miniBatchMaxKeys, or a test's
	buf    bytes.Buffer
}

func newBundleCache(keyType reflect.Type) *bundleCache {
	c := &bundleCache{states: make(map[string]stored), max: miniBatchMaxKeys}
	if keyType != reflect.TypeFor[[]byte]() {
		c.keyEnc = beam.NewElementEncoder(keyType)
	}
	return c
}

// reset forgets every key.
func (c *bundleCache) reset() { clear(c.states) }

// id is the cache's name of key's state in window w: the key's bytes and,
// in an interval window, its bounds. It is valid until the next id (no
// allocation per row: the map is indexed with string(id)).
func (c *bundleCache) id(w beam.Window, key any) ([]byte, error) {
	c.buf.Reset()
	if iw, ok := w.(window.IntervalWindow); ok {
		var bounds [16]byte
		binary.BigEndian.PutUint64(bounds[:8], uint64(iw.Start))
		binary.BigEndian.PutUint64(bounds[8:], uint64(iw.End))
		c.buf.Write(bounds[:])
	}
	if b, ok := key.([]byte); ok && c.keyEnc == nil {
		c.buf.Write(b)
	} else if err := c.keyEnc.Encode(key, &c.buf); err != nil {
		return nil, fmt.Errorf("dedup: encoding key: %w", err)
	}
	return c.buf.Bytes(), nil
}

// get returns the state of the key called id, if the bundle read or
// wrote it.
func (c *bundleCache) get(id []byte) (stored, bool) {
	was, ok := c.states[string(id)] // no allocation for the lookup
	return was, ok
}

// put records what the cell of the key called id holds.
func (c *bundleCache) put(id []byte, st stored) {
	if _, ok := c.states[string(id)]; !ok && len(c.states) >= c.max {
		c.reset()
	}
	c.states[string(id)] = st
}

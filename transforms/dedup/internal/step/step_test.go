package step

import (
	"bytes"
	"context"
	"reflect"
	"testing"
	"unicode/utf8"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/transforms/dedup/internal/core"
)

// A candidate tag round-trips time, versions held and row, is valid UTF-8
// whatever the row bytes (runners may hold tags as strings), and is ""
// (untagged) for a candidate too large to carry or at time 0 (a cleared
// timer's hold).
func TestCandidateTag_RoundTripsValidUTF8AndOnlySmallCandidates(t *testing.T) {
	for _, tc := range []struct {
		at   int64
		held int
		cand []byte
	}{
		{1, 1, nil},
		{-62135596800000, 8, []byte{0xff, 0xfe, 0, 1}},
		{1704067200000, 300, bytes.Repeat([]byte{0x80}, maxTagCandidate)},
	} {
		tag := candidateTag(tc.at, tc.held, tc.cand)
		require.NotEmpty(t, tag)
		assert.True(t, utf8.ValidString(tag))
		at, held, cand, err := parseCandidateTag(tag)
		require.NoError(t, err)
		assert.Equal(t, tc.at, at)
		assert.Equal(t, tc.held, held)
		assert.Equal(t, len(tc.cand), len(cand))
		assert.True(t, bytes.Equal(tc.cand, cand))
	}
	assert.Empty(t, candidateTag(1, 1, make([]byte, maxTagCandidate+1)))
	assert.Empty(t, candidateTag(0, 1, []byte{1}))
	for _, bad := range []string{"x", "c", "c!!", "cAAAA", "cAAAAAAAAAAA"} {
		_, _, _, err := parseCandidateTag(bad)
		assert.Error(t, err, bad)
	}
}

// The event-time timer's tag is persisted with the timer (a savepoint, an
// update hands it to the new job, whose firing reads the candidate from
// it), so its bytes are pinned as statecoder's state is: "c", then base64
// (URL alphabet, no padding) of the candidate's time (8 bytes big-endian),
// the versions its bag held (uvarint) and its row. Never edit these: add a
// form the parser also reads instead.
func TestCandidateTag_GoldenBytes(t *testing.T) {
	for _, g := range []struct {
		at   int64
		held int
		cand []byte
		tag  string
	}{
		{1, 1, nil, "cAAAAAAAAAAEB"},                                      // 00 00 00 00 00 00 00 01 | 01
		{1704067200000, 3, []byte("row"), "cAAABjMJR9AADcm93"},            // 00 00 01 8c c2 51 f4 00 | 03 | "row"
		{-62135596800000, 300, []byte{0xff, 0, 1}, "c___HfO3TKACsAv8AAQ"}, // ff ff c7 7c ed d3 28 00 | ac 02 | ff 00 01
	} {
		assert.Equal(t, g.tag, candidateTag(g.at, g.held, g.cand))
		at, held, cand, err := parseCandidateTag(g.tag)
		require.NoError(t, err)
		assert.Equal(t, g.at, at)
		assert.Equal(t, g.held, held)
		assert.True(t, bytes.Equal(g.cand, cand))
	}
}

// fakeStore counts reads.
type fakeStore struct{ reads int }

func (f *fakeStore) fetch(state.Provider) (stored, error) {
	f.reads++
	return stored{st: core.State{Phase: core.Emitted}}, nil
}

func (f *fakeStore) plan(context.Context, *metricSet, *stored, *core.State) (change, stored, error) {
	return change{}, stored{}, nil
}

func (f *fakeStore) apply(state.Provider, change) error { return nil }

// testStep is a step on st for keys of type kt, as Setup makes it.
func testStep(st Store, kt reflect.Type, mode OverlapMode) *Step {
	s := &Step{store: st, cache: newBundleCache(kt), m: newMetricSet("test")}
	s.io = newStateIO(context.Background(), "test", mode, st, s.cache, s.m)
	return s
}

// A bundle's cache names a key's state by its key and window, serves a key
// read or written earlier in the bundle without a read, and forgets all at
// the next bundle.
func TestBundleCache_ServesAKeysStateWithinABundleOnly(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		keys [2]any // two keys whose states differ
		kt   reflect.Type
	}{
		{"encoded keys", [2]any{[]byte("a"), []byte("b")}, reflect.TypeFor[[]byte]()},
		{"per-key string keys", [2]any{"a", "b"}, reflect.TypeFor[string]()},
		{"per-key float keys", [2]any{1.5, 2.5}, reflect.TypeFor[float64]()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newBundleCache(tc.kt)
			ids := map[string]bool{}
			for _, w := range []beam.Window{window.GlobalWindow{}, window.IntervalWindow{Start: 0, End: 10}, window.IntervalWindow{Start: 10, End: 20}} {
				for _, k := range tc.keys {
					id, err := c.id(w, k)
					require.NoError(t, err)
					ids[string(id)] = true
				}
			}
			assert.Len(t, ids, 6, "one state per key and window")

			var fs fakeStore
			s := testStep(&fs, tc.kt, WaitEach)
			id, err := s.cache.id(window.GlobalWindow{}, tc.keys[0])
			require.NoError(t, err)
			_, err = s.read(ctx, nil, id)
			require.NoError(t, err)
			_, err = s.read(ctx, nil, id)
			require.NoError(t, err)
			assert.Equal(t, 1, fs.reads, "the key's later rows come from the cache")
			s.startBundle()
			_, err = s.read(ctx, nil, id)
			require.NoError(t, err)
			assert.Equal(t, 2, fs.reads, "a new bundle reads again")
		})
	}
}

package core_test

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/coders/keycoder"
	"github.com/beamdedup/beamdedup/transforms/dedup/internal/core"
	"github.com/beamdedup/beamdedup/transforms/dedup/internal/statecoder"
	"github.com/beamdedup/beamdedup/transforms/rowkind"
)

// gridRow has the shape of the benchmark grid's rows (testing/bench.Row,
// which this package's tests do not import: it links the samples, built on
// these rules): the encoded candidate's size is what a state holds.
type gridRow struct {
	Key string `beam:"key"`
	Op  string `beam:"op"`
	TS  int64  `beam:"ts"`
	Seq int64  `beam:"seq"`
}

func init() { beam.RegisterType(reflect.TypeFor[gridRow]()) }

// stateSize is the persisted size of one key's state in one mode.
type stateSize struct {
	mode  string
	bytes int
}

// stateSizes builds each mode's state the way the transform does (core
// decisions on a fresh key, the candidate encoded by Beam's element
// encoder) and returns the bytes the runner stores for it, in the mode's
// layout (statecoder marks as Beam's varints, or one version), plus the
// size of the key itself (keycoder), which the runner stores with it; and,
// per bucket, a key's entry in its bucket's segment, its key in it.
func stateSizes(tb testing.TB) (sizes []stateSize, keyBytes int) {
	tb.Helper()
	row := gridRow{Key: "user-12345", Op: "+I", TS: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli() + 123_456, Seq: 123_456}
	var cand bytes.Buffer
	require.NoError(tb, beam.NewElementEncoder(reflect.TypeFor[gridRow]()).Encode(row, &cand))
	et, now := row.TS, time.Now().UnixMilli()
	windowEnd := int64(1) << 60

	first := func(cfg core.Config) core.State {
		var st core.State
		d := core.First{Config: cfg}.OnRow(&st, core.Row{Kind: rowkind.Insert, Time: et}, now)
		require.True(tb, d.Write)
		if d.Stored {
			st.Cand = cand.Bytes()
		}
		return st
	}
	emitted := func(cfg core.Config) core.State {
		st := first(cfg)
		d := cfg.OnTimer(&st, true, st.CandTime, now, windowEnd)
		require.True(tb, d.Emit)
		return st
	}
	add := func(mode string, st core.State) {
		n := 0
		if marks, err := statecoder.Marks(&st); err == nil {
			for _, m := range marks {
				n += len(binary.AppendUvarint(nil, uint64(m))) // Beam's varint of an int64
			}
		} else {
			_, version := statecoder.VersionChanges(0, &st)
			n = len(version)
		}
		sizes = append(sizes, stateSize{mode, n})
	}
	hour := time.Hour.Milliseconds()
	add("watermarkless (seen marker)", first(core.Config{}))
	add("watermarkless + StateTTL", first(core.Config{StateTTL: hour, ResetOnDuplicate: true, CleanupTimers: true}))
	add("watermarkless + EventTimeTTL", first(core.Config{EventTTL: hour, ResetOnDuplicate: true, CleanupTimers: true}))
	add("changelog (seen marker)", first(core.Config{}))
	add("event time, pending candidate", first(core.Config{EventTime: true}))
	add("event time, emitted", emitted(core.Config{EventTime: true}))
	add("event time + StateTTL, emitted", emitted(core.Config{EventTime: true, StateTTL: hour, CleanupTimers: true}))

	enc, err := keycoder.New(reflect.TypeFor[gridRow](), []string{"key"})
	require.NoError(tb, err)
	key := enc.Encode(row)
	// Per bucket, a key's entry in its bucket's cell holds the key too.
	entry := func(mode string, st core.State, timer byte) {
		e := statecoder.Entry{Key: key, State: statecoder.Encode(&st), Timer: timer, At: et}
		sizes = append(sizes, stateSize{"per bucket, " + mode + ", with its key", len(statecoder.AppendEntry(nil, &e))})
	}
	entry("watermarkless", first(core.Config{}), statecoder.NoTimer)
	entry("watermarkless + StateTTL", first(core.Config{StateTTL: hour, ResetOnDuplicate: true, CleanupTimers: true}), statecoder.CleanupTimer)
	entry("event time, pending candidate", first(core.Config{EventTime: true}), statecoder.FinalizeTimer)
	return sizes, len(key)
}

// TestStateBytesPerKey logs the persisted bytes of one key's state per mode
// and bounds them: a seen marker must stay a few bytes.
func TestStateBytesPerKey(t *testing.T) {
	sizes, keyBytes := stateSizes(t)
	t.Logf("key %q: %d bytes (keycoder)", "user-12345", keyBytes)
	for _, s := range sizes {
		t.Logf("%-56s %3d bytes", s.mode, s.bytes)
	}
	assert.LessOrEqual(t, sizes[0].bytes, 12, "watermarkless seen marker")
}

// BenchmarkStateBytes reports the same sizes as metrics (B/key), one
// sub-benchmark per mode, so they appear next to the pipeline figures.
func BenchmarkStateBytes(b *testing.B) {
	sizes, keyBytes := stateSizes(b)
	b.Run("key", func(b *testing.B) {
		for range b.N {
		}
		b.ReportMetric(float64(keyBytes), "B/key")
	})
	for _, s := range sizes {
		b.Run(strings.NewReplacer(" ", "_", ",", "", "(", "", ")", "", "+", "plus").Replace(s.mode), func(b *testing.B) {
			for range b.N {
			}
			b.ReportMetric(float64(s.bytes), "B/key")
		})
	}
}

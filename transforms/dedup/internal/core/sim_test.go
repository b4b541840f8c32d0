package core_test

import (
	"maps"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/transforms/dedup/internal/core"
	"github.com/beamdedup/beamdedup/transforms/dedup/internal/statecoder"
	"github.com/beamdedup/beamdedup/transforms/rowkind"
)

// sim is a small deterministic model of the Beam runner around the core,
// used the way the adapter in package dedup uses it:
//
//   - per key, the state is read (folded from its persisted form), OnRow
//     or OnTimer decides, and the state is written back only when the
//     decision says Write (a Phase None state is cleared);
//   - each key has ONE timer; setting it overwrites the previous one and
//     timers are never cleared. Finalize timers are event-time; Cleanup
//     timers are event-time when the family is EventTimeFamily and
//     processing-time otherwise. Event-time cleanup timers past the window
//     end are set at the window end (core.ClampToWindow);
//   - an event-time timer fires once the watermark is >= its time, a
//     processing-time timer once the clock is >= its time. Timers fire in a
//     "next bundle": on AdvanceClock, AdvanceWatermark or Fire, never inside
//     Arrive, so a timer set behind the watermark fires at the next advance.
//
// The state round-trips through internal/statecoder on every write, in the
// layout the adapter uses (marks for watermarkless KeepFirst, versions for
// event-time KeepFirst and KeepLast), so a field a layout forgot would show
// up here.
type sim struct {
	t         testing.TB
	cfg       core.Config
	windowEnd int64 // last event time of the (one) window
	now       int64 // processing time
	wm        int64 // input watermark
	keys      map[string]*simKey
	out       []emission
	firings   int // timer firings so far
}

type simKey struct {
	marks    []int64  // persisted state, marks layout
	versions [][]byte // persisted state, versions layout
	timer    core.Timer
	proc     bool // the timer is a processing-time timer
	set      bool
}

// emission is one output row: its id, key, output event time and the
// processing time at which it was emitted.
type emission struct {
	Row       string
	Key       string
	EventTime int64
	ProcTime  int64
}

// globalWindowEnd is the end of Beam's global window, in ms (mtime.EndOfGlobalWindowTime).
const globalWindowEnd = math.MaxInt64/1000 - 24*60*60*1000

// minWatermark is the watermark before any input (mtime.MinTimestamp).
const minWatermark = math.MinInt64 / 1000

// maxFiringsPerAdvance bounds timer loops so a core bug cannot hang a test.
const maxFiringsPerAdvance = 10_000

func newSim(t testing.TB, cfg core.Config, start int64) *sim {
	return &sim{t: t, cfg: cfg, windowEnd: globalWindowEnd, now: start, wm: minWatermark, keys: map[string]*simKey{}}
}

func (s *sim) key(k string) *simKey {
	sk, ok := s.keys[k]
	if !ok {
		sk = &simKey{}
		s.keys[k] = sk
	}
	return sk
}

// State returns the key's persisted state (Phase None when absent).
func (s *sim) State(key string) core.State {
	sk, ok := s.keys[key]
	if !ok {
		return core.State{}
	}
	if len(sk.versions) > 0 {
		st, err := statecoder.LastVersion(sk.versions)
		require.NoError(s.t, err)
		return st
	}
	st, err := statecoder.FoldMarks(sk.marks)
	require.NoError(s.t, err)
	return st
}

// Timer returns the key's timer and whether one was ever set.
func (s *sim) Timer(key string) (core.Timer, bool) {
	sk, ok := s.keys[key]
	if !ok {
		return core.Timer{}, false
	}
	return sk.timer, sk.set
}

// Out returns the rows emitted so far.
func (s *sim) Out() []emission { return s.out }

// Rows returns the ids of the rows emitted so far.
func (s *sim) Rows() []string {
	ids := make([]string, len(s.out))
	for i, e := range s.out {
		ids[i] = e.Row
	}
	return ids
}

// Arrive processes one row of key with the given kind and event time at
// the current processing time, and returns the core's decision.
func (s *sim) Arrive(key string, kind rowkind.Kind, eventTime int64, row string) core.Decision {
	s.t.Helper()
	require.NotEmpty(s.t, row, "row ids must be non-empty: they are the candidate bytes")
	sk := s.key(key)
	st := s.State(key)
	old := st
	d := core.First{Config: s.cfg}.OnRow(&st, core.Row{Kind: kind, Time: eventTime}, s.now)
	switch d.Outcome {
	case core.Emit:
		s.out = append(s.out, emission{Row: row, Key: key, EventTime: eventTime, ProcTime: s.now})
	case core.BecomeCandidate, core.ReplaceCandidate:
		require.True(s.t, d.Write, "a new candidate must be written")
		require.True(s.t, d.Stored, "a new candidate is the stored row")
		st.Cand = []byte(row)
	}
	if d.Write {
		s.write(sk, &old, &st, s.cfg.EventTime)
	}
	s.arm(sk, d.Timer)
	return d
}

// ArriveLast processes one KeepLast row of key at the current processing
// time (row is its encoding; seq its SequenceBy value or "") and records
// each emission as "<kind> <row>".
func (s *sim) ArriveLast(key string, kind rowkind.Kind, eventTime int64, seq, row string) core.Decision {
	s.t.Helper()
	require.NotEmpty(s.t, row, "row ids must be non-empty: they are the stored bytes")
	sk := s.key(key)
	st := s.State(key)
	was := st
	old := string(st.Cand)
	d := core.Last{Config: s.cfg}.OnRow(&st, core.Row{Kind: kind, Time: eventTime, Seq: seqOrNil(seq), Row: []byte(row)}, s.now)
	for _, e := range d.Emissions() {
		r := row
		if e.Old {
			require.NotEmpty(s.t, old, "an emission of the old row without one")
			r = old
		}
		s.out = append(s.out, emission{Row: kindNames[e.Kind] + " " + r, Key: key, EventTime: eventTime, ProcTime: s.now})
	}
	if d.Write {
		s.write(sk, &was, &st, true)
	}
	s.arm(sk, d.Timer)
	return d
}

var kindNames = map[rowkind.Kind]string{rowkind.Insert: "+I", rowkind.UpdateBefore: "-U", rowkind.UpdateAfter: "+U", rowkind.Delete: "-D"}

// AdvanceClock moves processing time to now and fires the due timers.
func (s *sim) AdvanceClock(now int64) {
	s.t.Helper()
	require.GreaterOrEqual(s.t, now, s.now, "processing time never goes back")
	s.now = now
	s.Fire()
}

// AdvanceWatermark moves the watermark to wm and fires the due timers.
func (s *sim) AdvanceWatermark(wm int64) {
	s.t.Helper()
	require.GreaterOrEqual(s.t, wm, s.wm, "the watermark never goes back")
	s.wm = wm
	s.Fire()
}

// Fire fires every due timer, earliest first (ties by key), including
// timers that the firings themselves set and that are already due.
func (s *sim) Fire() {
	s.t.Helper()
	for n := 0; ; n++ {
		require.Less(s.t, n, maxFiringsPerAdvance, "timers keep firing: a timer loop")
		key, ok := s.nextDue()
		if !ok {
			return
		}
		s.fire(key)
	}
}

func (s *sim) nextDue() (string, bool) {
	var best string
	var bestAt int64
	found := false
	for _, k := range slices.Sorted(maps.Keys(s.keys)) {
		sk := s.keys[k]
		if !sk.set {
			continue
		}
		limit := s.wm
		if sk.proc {
			limit = s.now
		}
		if sk.timer.At > limit {
			continue
		}
		if !found || sk.timer.At < bestAt {
			best, bestAt, found = k, sk.timer.At, true
		}
	}
	return best, found
}

func (s *sim) fire(key string) {
	sk := s.keys[key]
	timer := sk.timer
	sk.set = false // it fired
	s.firings++
	st := s.State(key)
	was := st
	cand := string(st.Cand)
	d := s.cfg.OnTimer(&st, timer.Kind == core.Finalize, timer.At, s.now, s.windowEnd)
	if d.Emit {
		require.NotEmpty(s.t, cand, "emitting a row that was never stored")
		row := cand
		if d.Kind == rowkind.Delete { // KeepLast's retraction on expiry
			row = "-D " + cand
		}
		s.out = append(s.out, emission{Row: row, Key: key, EventTime: d.EmitTime, ProcTime: s.now})
	}
	if d.Write {
		s.write(sk, &was, &st, len(sk.versions) > 0)
	}
	s.arm(sk, d.Timer)
}

// write persists the key's state, which was old when read, as the adapter
// does: in versions (a state that holds a row) or marks.
func (s *sim) write(sk *simKey, old, st *core.State, versions bool) {
	if versions {
		clear, add := statecoder.VersionChanges(len(sk.versions), st)
		if clear {
			sk.versions = nil
		}
		if add != nil {
			sk.versions = append(sk.versions, add)
		}
		require.LessOrEqual(s.t, len(sk.versions), statecoder.MaxVersions)
		return
	}
	clear, add, err := statecoder.MarkChanges(sk.marks, old, st)
	require.NoError(s.t, err)
	if clear {
		sk.marks = nil
	}
	sk.marks = append(sk.marks, add...)
	require.LessOrEqual(s.t, len(sk.marks), statecoder.MaxMarks)
}

// arm sets the key's one timer as the adapter does, checking that the
// timer belongs to the configuration's one family.
func (s *sim) arm(sk *simKey, t core.Timer) {
	s.t.Helper()
	fam := s.cfg.Family()
	switch t.Kind {
	case core.NoTimer:
		return
	case core.Finalize:
		require.Equal(s.t, core.EventTimeFamily, fam, "a finalize timer needs the event-time family")
		sk.proc = false
	case core.Cleanup:
		require.NotEqual(s.t, core.NoFamily, fam, "a cleanup timer in a configuration without a timer family")
		sk.proc = fam == core.ProcessingTimeFamily
		if !sk.proc {
			t = core.ClampToWindow(t, s.windowEnd) // as the adapter does
		}
	default:
		require.Failf(s.t, "unknown timer kind", "%d", t.Kind)
	}
	sk.timer, sk.set = t, true
}

// Times used by the tests: a wall-clock day, so times look like the spec's.
var day = time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC).UnixMilli()

// at returns the Unix ms of hh:mm on the test day.
func at(hh, mm int) int64 { return day + int64(hh)*3_600_000 + int64(mm)*60_000 }

const (
	second = int64(time.Second / time.Millisecond)
	minute = int64(time.Minute / time.Millisecond)
)

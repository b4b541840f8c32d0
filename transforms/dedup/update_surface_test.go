package dedup_test

import (
	"bufio"
	"encoding/base64"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/graphx"
	v1pb "github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/graphx/v1"
	pipepb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/pipeline_v1"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/teststream"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// The update surface: what a runner matches a running job's state by when
// the job is updated in place (Dataflow) or restored from a savepoint
// (Flink): the stateful step's name, its input's coder (state is kept per
// encoded key and window), its state IDs with their coders and its timer
// families. testdata/update-surface.golden holds it for every mode, taken
// from the pipeline proto a runner receives. A change to it breaks the
// update of a running job; the failure says what changed and what that
// breaks. docs/state.md, "The update surface".

var updateSurface = flag.Bool("update", false, "rewrite testdata/update-surface.golden from the current code")

const surfaceGolden = "testdata/update-surface.golden"

// surfaceRow is the row type of every mode: a key, a kind, an event time
// and a sequence column.
type surfaceRow struct {
	OrderID string    `beam:"order_id"`
	Op      string    `beam:"op"`
	Ts      time.Time `beam:"ts"`
	Seq     int64     `beam:"seq"`
	Status  string    `beam:"status"`
}

func surfaceKV(r surfaceRow) (string, surfaceRow) { return r.OrderID, r }

func init() {
	beam.RegisterType(reflect.TypeFor[surfaceRow]())
	register.Function1x2(surfaceKV)
}

// surfaceMode is one way of using a transform that a running job may be
// built with.
type surfaceMode struct {
	name      string
	transform string // a function of the public API, see applySurface
	windowed  bool   // the input in fixed windows
	opts      []dedup.Option
}

const surfaceUID = "order-status-dedup"

func surfaceModes() []surfaceMode {
	key, uid := rowspec.PartitionBy("order_id"), dedup.UID(surfaceUID)
	hour := time.Hour
	first := func(name string, opts ...dedup.Option) surfaceMode {
		return surfaceMode{name: "KeepFirst, " + name, transform: "KeepFirst", opts: append([]dedup.Option{key, uid}, opts...)}
	}
	last := func(name string, opts ...dedup.Option) surfaceMode {
		return surfaceMode{name: "KeepLast, " + name, transform: "KeepLast", opts: append([]dedup.Option{key, uid}, opts...)}
	}
	kind := rowspec.KindColumn("op")
	modes := []surfaceMode{
		first("watermarkless"),
		first("watermarkless, StateTTL", dedup.StateTTL(hour)),
		first("watermarkless, StateTTL without cleanup timers", dedup.StateTTL(hour), dedup.CleanupTimers(false)),
		first("watermarkless, EventTimeTTL", dedup.EventTimeTTL(hour)),
		first("watermarkless, StateTTL and EventTimeTTL", dedup.StateTTL(hour), dedup.EventTimeTTL(hour)),
		first("watermarkless, ResetTTLOnDuplicate(false)", dedup.StateTTL(hour), dedup.ResetTTLOnDuplicate(false)),
		first("watermarkless, no mini-batch", dedup.MiniBatch(false)),
		first("event time", rowspec.OnTime("ts")),
		first("event time, StateTTL", rowspec.OnTime("ts"), dedup.StateTTL(hour)),
		first("event time, StateTTL without cleanup timers", rowspec.OnTime("ts"), dedup.StateTTL(hour), dedup.CleanupTimers(false)),
		first("event time, EventTimeTTL", rowspec.OnTime("ts"), dedup.EventTimeTTL(hour)),
		first("changelog input", rowspec.KindColumn("op")),
		first("changelog input, StateTTL", rowspec.KindColumn("op"), dedup.StateTTL(hour)),
		first("state per bucket", dedup.StateBuckets(64)),
		first("state per bucket, StateTTL", dedup.StateBuckets(64), dedup.StateTTL(hour)),
		first("state per bucket, EventTimeTTL", dedup.StateBuckets(64), dedup.EventTimeTTL(hour)),
		first("state per bucket, event time", dedup.StateBuckets(64), rowspec.OnTime("ts")),
		{name: "KeepFirst, the default UID", transform: "KeepFirst", opts: []dedup.Option{key}},
		{name: "KeepFirst, fixed windows", transform: "KeepFirst", windowed: true, opts: []dedup.Option{key, uid}},
		{name: "KeepFirst, KV input", transform: "KeepFirst, KV input", opts: []dedup.Option{uid}},
		{name: "KeepFirst, KV input, event time", transform: "KeepFirst, KV input", opts: []dedup.Option{uid, rowspec.OnTime("ts")}},

		last("arrival order", kind),
		last("OnTime", kind, rowspec.OnTime("ts")),
		last("SequenceBy", kind, rowspec.SequenceBy("seq")),
		last("Upsert", rowspec.Upsert()),
		last("changelog input", rowspec.KindColumn("op")),
		last("changelog input, OnTime", rowspec.KindColumn("op"), rowspec.OnTime("ts")),
		last("StateTTL", kind, dedup.StateTTL(hour)),
		last("StateTTL without cleanup timers", kind, dedup.StateTTL(hour), dedup.CleanupTimers(false)),
		last("StateTTL, RetractOnExpiry", kind, dedup.StateTTL(hour), dedup.RetractOnExpiry(true)),
		last("EventTimeTTL", kind, dedup.EventTimeTTL(hour)),
		last("EventTimeTTL, RetractOnExpiry", kind, dedup.EventTimeTTL(hour), dedup.RetractOnExpiry(true)),
		last("no mini-batch", kind, dedup.MiniBatch(false)),
		last("state per bucket", kind, dedup.StateBuckets(64)),
		last("state per bucket, StateTTL", kind, dedup.StateBuckets(64), dedup.StateTTL(hour)),
		last("state per bucket, EventTimeTTL", kind, dedup.StateBuckets(64), dedup.EventTimeTTL(hour)),
		{name: "KeepLast, fixed windows", transform: "KeepLast", windowed: true, opts: []dedup.Option{key, uid, kind}},
		{name: "KeepLast, KV input", transform: "KeepLast, KV input", opts: []dedup.Option{uid, kind, rowspec.OnTime("ts")}},

		{name: "WindowFirst", transform: "WindowFirst", windowed: true, opts: []dedup.Option{key, uid}},
		{name: "WindowLast, SequenceBy", transform: "WindowLast", windowed: true, opts: []dedup.Option{key, uid, rowspec.SequenceBy("seq")}},
	}
	return modes
}

// applySurface builds the mode's transform on in: the one place this test
// calls the public API.
func applySurface(s beam.Scope, in beam.PCollection, m surfaceMode) error {
	var err error
	switch m.transform {
	case "KeepFirst":
		_, err = dedup.TryKeepFirst(s, in, m.opts...)
	case "KeepLast":
		_, err = dedup.TryKeepLast(s, in, m.opts...)
	case "KeepFirst, KV input":
		_, err = dedup.TryKeepFirst(s, beam.ParDo(s, surfaceKV, in), m.opts...)
	case "KeepLast, KV input":
		_, err = dedup.TryKeepLast(s, beam.ParDo(s, surfaceKV, in), m.opts...)
	case "WindowFirst":
		_, err = dedup.TryWindowFirst(s, in, m.opts...)
	case "WindowLast":
		_, err = dedup.TryWindowLast(s, in, m.opts...)
	default:
		err = fmt.Errorf("no transform %q", m.transform)
	}
	return err
}

// surfaceOf builds the mode on a stream, as a running job has it, and
// returns its surface as the golden file's lines.
func surfaceOf(t *testing.T, m surfaceMode) []string {
	p, s := beam.NewPipelineWithRoot()
	cfg := teststream.NewConfig()
	require.NoError(t, cfg.AddElements(0, surfaceRow{OrderID: "o1", Op: "+I", Ts: time.UnixMilli(0), Seq: 1, Status: "created"}))
	in := teststream.Create(s, cfg)
	if m.windowed {
		in = beam.WindowInto(s, window.NewFixedWindows(time.Hour), in)
	}
	require.NoError(t, applySurface(s, in, m), m.name)
	edges, _, err := p.Build()
	require.NoError(t, err, m.name)
	pb, err := graphx.Marshal(edges, &graphx.Options{Environment: &pipepb.Environment{}})
	require.NoError(t, err, m.name)
	lines, err := surfaceLines(pb.GetComponents())
	require.NoError(t, err, m.name)
	return lines
}

// surfaceLines are the persisted-state-bearing transforms of a pipeline:
// the stateful ParDo (state or timers) or the combine (an accumulator per
// key and window). Each mode has exactly one.
func surfaceLines(c *pipepb.Components) ([]string, error) {
	r := coderRenderer{c: c}
	var found, lines []string
	for _, id := range sortedKeys(c.GetTransforms()) {
		tr := c.GetTransforms()[id]
		switch tr.GetSpec().GetUrn() {
		case "beam:transform:pardo:v1":
			var pd pipepb.ParDoPayload
			if err := proto.Unmarshal(tr.GetSpec().GetPayload(), &pd); err != nil {
				return nil, err
			}
			if len(pd.GetStateSpecs()) == 0 && len(pd.GetTimerFamilySpecs()) == 0 {
				continue
			}
			found = append(found, tr.GetUniqueName())
			lines = append(lines, "step: "+tr.GetUniqueName()+" (stateful ParDo)")
			lines = append(lines, "input: "+r.input(tr))
			for _, sid := range sortedKeys(pd.GetStateSpecs()) {
				lines = append(lines, fmt.Sprintf("state %s: %s", sid, r.state(pd.GetStateSpecs()[sid])))
			}
			for _, tid := range sortedKeys(pd.GetTimerFamilySpecs()) {
				spec := pd.GetTimerFamilySpecs()[tid]
				lines = append(lines, fmt.Sprintf("timer %s: %s, %s", tid, strings.ToLower(spec.GetTimeDomain().String()), r.coder(spec.GetTimerFamilyCoderId())))
			}
		case "beam:transform:combine_per_key:v1":
			var cp pipepb.CombinePayload
			if err := proto.Unmarshal(tr.GetSpec().GetPayload(), &cp); err != nil {
				return nil, err
			}
			found = append(found, tr.GetUniqueName())
			lines = append(lines, "step: "+tr.GetUniqueName()+" (combine per key)")
			lines = append(lines, "input: "+r.input(tr))
			lines = append(lines, "accumulator: "+r.coder(cp.GetAccumulatorCoderId()))
		}
	}
	if len(found) != 1 {
		return nil, fmt.Errorf("want one stateful step or combine, found %q", found)
	}
	return lines, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// coderRenderer writes coders as their structure (URNs without the
// beam:coder: prefix and version, components, a row's fields), leaving
// out what the SDK generates anew for every pipeline (coder IDs, schema
// IDs).
type coderRenderer struct{ c *pipepb.Components }

func (r coderRenderer) input(tr *pipepb.PTransform) string {
	var pcs []string
	for _, local := range sortedKeys(tr.GetInputs()) {
		pc := r.c.GetPcollections()[tr.GetInputs()[local]]
		ws := r.c.GetWindowingStrategies()[pc.GetWindowingStrategyId()]
		pcs = append(pcs, fmt.Sprintf("%s in %s (%s)", r.coder(pc.GetCoderId()), shortURN(ws.GetWindowFn().GetUrn()), r.coder(ws.GetWindowCoderId())))
	}
	return strings.Join(pcs, "; ")
}

func (r coderRenderer) state(spec *pipepb.StateSpec) string {
	switch {
	case spec.GetBagSpec() != nil:
		return "bag of " + r.coder(spec.GetBagSpec().GetElementCoderId())
	case spec.GetReadModifyWriteSpec() != nil:
		return "value of " + r.coder(spec.GetReadModifyWriteSpec().GetCoderId())
	case spec.GetCombiningSpec() != nil:
		return "combining of " + r.coder(spec.GetCombiningSpec().GetAccumulatorCoderId())
	case spec.GetMapSpec() != nil:
		return "map of " + r.coder(spec.GetMapSpec().GetKeyCoderId()) + " to " + r.coder(spec.GetMapSpec().GetValueCoderId())
	case spec.GetSetSpec() != nil:
		return "set of " + r.coder(spec.GetSetSpec().GetElementCoderId())
	}
	return spec.GetProtocol().GetUrn()
}

func (r coderRenderer) coder(id string) string {
	c, ok := r.c.GetCoders()[id]
	if !ok {
		return "missing coder " + id
	}
	name := shortURN(c.GetSpec().GetUrn())
	switch c.GetSpec().GetUrn() {
	case "beam:coder:row:v1":
		var sc pipepb.Schema
		if err := proto.Unmarshal(c.GetSpec().GetPayload(), &sc); err != nil {
			return name + " (unreadable schema: " + err.Error() + ")"
		}
		return "row" + schemaString(&sc)
	case "beam:go:coder:custom:v1":
		return "go custom " + customString(c.GetSpec().GetPayload())
	}
	var parts []string
	for _, cid := range c.GetComponentCoderIds() {
		parts = append(parts, r.coder(cid))
	}
	if len(parts) == 0 {
		return name
	}
	return name + "<" + strings.Join(parts, ", ") + ">"
}

func schemaString(sc *pipepb.Schema) string {
	var fields []string
	for _, f := range sc.GetFields() {
		fields = append(fields, f.GetName()+" "+fieldTypeString(f.GetType()))
	}
	return "{" + strings.Join(fields, ", ") + "}"
}

func fieldTypeString(ft *pipepb.FieldType) string {
	s := ""
	switch {
	case ft.GetLogicalType() != nil:
		s = "logical " + ft.GetLogicalType().GetUrn() + " as " + fieldTypeString(ft.GetLogicalType().GetRepresentation())
	case ft.GetRowType() != nil:
		s = "row" + schemaString(ft.GetRowType().GetSchema())
	case ft.GetArrayType() != nil:
		s = "array of " + fieldTypeString(ft.GetArrayType().GetElementType())
	case ft.GetIterableType() != nil:
		s = "iterable of " + fieldTypeString(ft.GetIterableType().GetElementType())
	case ft.GetMapType() != nil:
		s = "map of " + fieldTypeString(ft.GetMapType().GetKeyType()) + " to " + fieldTypeString(ft.GetMapType().GetValueType())
	default:
		s = strings.ToLower(ft.GetAtomicType().String())
	}
	if ft.GetNullable() {
		s = "nullable " + s
	}
	return s
}

// customString names a Go custom coder by its type and its functions: the
// bytes a runner stores are what those functions write.
func customString(payload []byte) string {
	raw, err := base64.StdEncoding.DecodeString(string(payload))
	if err != nil {
		raw = payload
	}
	var cc v1pb.CustomCoder
	if err := proto.Unmarshal(raw, &cc); err != nil {
		return "(unreadable: " + err.Error() + ")"
	}
	return fmt.Sprintf("%s (encode %s, decode %s)", cc.GetName(), cc.GetEnc().GetName(), cc.GetDec().GetName())
}

func shortURN(urn string) string {
	urn = strings.TrimPrefix(urn, "beam:coder:")
	urn = strings.TrimPrefix(urn, "beam:window_fn:")
	return strings.TrimSuffix(strings.TrimSuffix(urn, ":v1"), ":v2")
}

// TestUpdateSurface_EveryModeKeepsItsStepStateAndTimers compares each
// mode's surface with the committed golden file. Run it with -update
// (go test ./transforms/dedup/ -run TestUpdateSurface -update) to accept a
// change, after writing in CHANGELOG.md what running jobs must do.
func TestUpdateSurface_EveryModeKeepsItsStepStateAndTimers(t *testing.T) {
	got := map[string][]string{}
	var order []string
	for _, m := range surfaceModes() {
		require.NotContains(t, got, m.name, "two modes named alike")
		got[m.name] = surfaceOf(t, m)
		order = append(order, m.name)
	}
	if *updateSurface {
		require.NoError(t, os.MkdirAll(filepath.Dir(surfaceGolden), 0o755))
		require.NoError(t, os.WriteFile(surfaceGolden, []byte(formatSurface(order, got)), 0o644))
		t.Logf("wrote %s", surfaceGolden)
		return
	}
	want, err := readSurface(surfaceGolden)
	require.NoError(t, err, "run go test ./transforms/dedup/ -run TestUpdateSurface -update to write it")
	if changes := surfaceChanges(want, got); len(changes) > 0 {
		t.Errorf("the update surface changed: a job running the code before cannot be updated to this code as it is, nor restored from its savepoint.\n\n%s\n\n"+
			"If the change is meant: release it as a major version, say in CHANGELOG.md what a running job must do (drain it, or map the old names), "+
			"and run go test ./transforms/dedup/ -run TestUpdateSurface -update.", strings.Join(changes, "\n\n"))
	}
}

// TestUpdateSurface_ChangesSayWhatTheyBreak checks the failure message of
// the golden test on made-up changes.
func TestUpdateSurface_ChangesSayWhatTheyBreak(t *testing.T) {
	want := map[string][]string{"m": {
		"step: u/Dedup/dedup.marksFn (stateful ParDo)",
		"input: kv<bytes, row{id string}> in global_windows (global_window)",
		"state keepfirst: bag of varint",
		"timer keepfirst-cleanup: processing_time, timer<bytes, global_window>",
	}, "gone": {"step: x"}}
	got := map[string][]string{"m": {
		"step: u/Dedup/dedup.marksProcFn (stateful ParDo)",
		"input: kv<bytes, row{id string}> in global_windows (global_window)",
		"state keepfirst: bag of bytes",
		"state extra: bag of varint",
	}, "new": {"step: y"}}
	changes := strings.Join(surfaceChanges(want, got), "\n")
	for _, s := range []string{
		"m: step changed\n  was u/Dedup/dedup.marksFn (stateful ParDo)\n  now u/Dedup/dedup.marksProcFn (stateful ParDo)\n  breaks: ",
		"m: state keepfirst changed\n  was bag of varint\n  now bag of bytes\n  breaks: ",
		"m: state extra added\n  now bag of varint\n  breaks: the new state starts empty",
		"m: timer keepfirst-cleanup removed\n  was processing_time, timer<bytes, global_window>\n  breaks: timers the running job set in this family never fire",
		"gone: the mode is no longer checked",
		"new: a mode without a golden entry",
		"--transform_name_mapping",
	} {
		require.Contains(t, changes, s)
	}
}

// consequences say what a change to an entry breaks for a running job, by
// the entry's kind and how it changed.
var consequences = map[string]map[string]string{
	"step": {"": "Dataflow matches a running job's state to the new job's steps by name: the update needs " +
		"--transform_name_mapping (Beam Go's Dataflow flag) from the old name to the new one, else it is refused or the state is left behind; " +
		"a Flink savepoint matches operators by their stage's input PCollection, not by name (docs/state.md, \"What each runner matches\")."},
	"input": {"": "state is kept per encoded key and window: under another key or window coder the new job looks up " +
		"keys the running job never stored (every key is new again), and Dataflow checks coder compatibility on update."},
	"state": {
		"changed": "the new job decodes the running job's state with another coder, bytes it did not write; " +
			"Dataflow checks coder compatibility on update, a Flink restore hands the bytes over as they are.",
		"removed": "the running job's state under this ID is left behind: every key is forgotten, so a key seen before is emitted again.",
		"added":   "the new state starts empty on every key the running job stored.",
	},
	"timer": {
		"changed": "the running job's pending timers in this family are of another time domain or coder: they may never fire, " +
			"so a pending event-time candidate is never emitted and idle state is never cleaned up.",
		"removed": "timers the running job set in this family never fire in the new job: a pending event-time candidate " +
			"is never emitted, idle state is never cleaned up.",
		"added": "keys the running job stored have no timer in this family until their next row.",
	},
	"accumulator": {"": "accumulators of the windows open at the update are decoded with another coder, bytes it did not write."},
}

func consequence(key, how string) string {
	kind, _, _ := strings.Cut(key, " ")
	if c, ok := consequences[kind][how]; ok {
		return c
	}
	return consequences[kind][""]
}

// surfaceChanges lists the differences between the golden surface and the
// current one, mode by mode, entry by entry, each with what it breaks.
func surfaceChanges(want, got map[string][]string) []string {
	var changes []string
	for _, mode := range sortedKeys(want) {
		g, ok := got[mode]
		if !ok {
			changes = append(changes, mode+": the mode is no longer checked (renamed or dropped from surfaceModes?); if it is still supported, keep it in the table")
			continue
		}
		w := entries(want[mode])
		ge := entries(g)
		for _, key := range sortedKeys(w) {
			if v, ok := ge[key]; !ok {
				changes = append(changes, fmt.Sprintf("%s: %s removed\n  was %s\n  breaks: %s", mode, key, w[key], consequence(key, "removed")))
			} else if v != w[key] {
				changes = append(changes, fmt.Sprintf("%s: %s changed\n  was %s\n  now %s\n  breaks: %s", mode, key, w[key], v, consequence(key, "changed")))
			}
		}
		for _, key := range sortedKeys(ge) {
			if _, ok := w[key]; !ok {
				changes = append(changes, fmt.Sprintf("%s: %s added\n  now %s\n  breaks: %s", mode, key, ge[key], consequence(key, "added")))
			}
		}
	}
	for _, mode := range sortedKeys(got) {
		if _, ok := want[mode]; !ok {
			changes = append(changes, mode+": a mode without a golden entry; add it with -update")
		}
	}
	return changes
}

// entries maps a mode's lines by what they name ("step", "state keepfirst").
func entries(lines []string) map[string]string {
	m := map[string]string{}
	for _, l := range lines {
		k, v, _ := strings.Cut(l, ": ")
		m[k] = v
	}
	return m
}

const surfaceHeader = `# The update surface of KeepFirst, KeepLast and window dedup: per mode,
# what Dataflow's update and a Flink savepoint restore match a running
# job's state by, from the pipeline proto the runner receives. A change
# here breaks running jobs (docs/state.md, "The update surface").
# Written by: go test ./transforms/dedup/ -run TestUpdateSurface -update
`

func formatSurface(order []string, got map[string][]string) string {
	var b strings.Builder
	b.WriteString(surfaceHeader)
	for _, mode := range order {
		fmt.Fprintf(&b, "\n== %s\n", mode)
		for _, l := range got[mode] {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

func readSurface(path string) (map[string][]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string][]string{}
	mode := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "== "):
			mode = strings.TrimPrefix(line, "== ")
			if _, dup := out[mode]; dup {
				return nil, fmt.Errorf("%s: mode %q twice", path, mode)
			}
			out[mode] = []string{}
		case mode == "":
			return nil, fmt.Errorf("%s: %q before the first mode", path, line)
		default:
			out[mode] = append(out[mode], line)
		}
	}
	return out, sc.Err()
}

package kafkaio

import (
	"cmp"
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/timers"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/typex"
)

var recordT = reflect.TypeFor[Record]()

func init() {
	beam.RegisterType(reflect.TypeFor[marks]())
}

// Commit commits, for the consumer group group on brokers, the offsets of
// the records of safe: each PCollection<Record> (Write's output, a dead
// letter's write) or PCollection<KV<K, Record>> (KeepFirst's Dropped). A
// partition's offset is committed once every record before it is safe,
// so a crash loses no record: a later start reads again what was not
// safe, and at most that.
//
// Give it, in one call, every collection through which records of the
// group's Read become safe: each partition's one ledger must see every
// record. It panics on invalid arguments; TryCommit returns the error.
func Commit(s beam.Scope, brokers, group string, safe ...beam.PCollection) {
	if err := TryCommit(s, brokers, group, safe...); err != nil {
		panic(err)
	}
}

// TryCommit is Commit returning construction errors.
func TryCommit(s beam.Scope, brokers, group string, safe ...beam.PCollection) error {
	errs := []error{checkBrokers(brokers)}
	if group == "" {
		errs = append(errs, fmt.Errorf("no group; want the Group of the Read"))
	}
	if len(safe) == 0 {
		errs = append(errs, fmt.Errorf("no collection; want those through which the Read's records become safe"))
	}
	var bad []string
	for i, col := range safe {
		if !col.IsValid() || (!isRecords(col) && !isDropped(col)) {
			bad = append(bad, fmt.Sprintf("collection %d is %v", i+1, typeOf(col)))
		}
	}
	if len(bad) > 0 {
		errs = append(errs, fmt.Errorf("needs PCollection<kafkaio.Record> or PCollection<KV<K, kafkaio.Record>>: %s", strings.Join(bad, ", ")))
	}
	if _, err := newConfig("kafkaio.Commit", nil, nil, errs...); err != nil {
		return err
	}
	s = s.Scope("kafkaio.Commit")
	var spans []beam.PCollection
	for _, col := range safe {
		if isDropped(col) {
			col = beam.ParDo(s, &droppedFn{}, beam.DropKey(s, col))
		}
		spans = append(spans, beam.ParDo(s, &markFn{}, col))
	}
	beam.ParDo0(s, &ledgerFn{Brokers: brokers, Group: group, State: state.MakeValueState[ledgerState]("ledger"),
		End: timers.InEventTime("end")}, beam.Flatten(s, spans...))
	return nil
}

func isRecords(col beam.PCollection) bool { return col.Type().Type() == recordT }

func isDropped(col beam.PCollection) bool {
	t := col.Type()
	return typex.IsKV(t) && t.Components()[1].Type() == recordT
}

func typeOf(col beam.PCollection) string {
	if !col.IsValid() {
		return "invalid"
	}
	return fmt.Sprint(col.Type())
}

// droppedFn counts the duplicates a dedup step dropped.
type droppedFn struct{ n int64 }

func (fn *droppedFn) ProcessElement(_ context.Context, r Record) Record {
	fn.n++
	return r
}

func (fn *droppedFn) FinishBundle(ctx context.Context) {
	cDropped.Inc(ctx, fn.n)
	fn.n = 0
}

// marks are the offsets of one partition a bundle marked safe: the spans
// [From[i], To[i]).
type marks struct {
	Topic     string
	Partition int32
	From, To  []int64
}

func ledgerKey(topic string, partition int32) string { return fmt.Sprintf("%s/%d", topic, partition) }

// markFn collects the offsets its bundle's records make safe (a record's,
// and those passed over before it) and hands them to their partitions'
// ledgers at the bundle's end, merged into spans: a failed bundle marks
// nothing.
type markFn struct {
	byPart map[ledgerPart][]span
	n      int64 // records marked in the bundle
}

type ledgerPart struct {
	topic     string
	partition int32
}

func (fn *markFn) StartBundle(context.Context, func(string, marks)) {
	fn.byPart = map[ledgerPart][]span{}
}

func (fn *markFn) ProcessElement(_ context.Context, r Record, _ func(string, marks)) {
	p := ledgerPart{r.Topic, r.Partition}
	sp := span{from: r.Offset - max(r.Skipped, 0), to: r.Offset + 1}
	fn.n++
	spans := fn.byPart[p]
	if n := len(spans); n > 0 && spans[n-1].to == sp.from {
		spans[n-1].to = sp.to
		return
	}
	fn.byPart[p] = append(spans, sp)
}

func (fn *markFn) FinishBundle(ctx context.Context, emit func(string, marks)) {
	cSafe.Inc(ctx, fn.n)
	fn.n = 0
	for p, spans := range fn.byPart {
		m := marks{Topic: p.topic, Partition: p.partition}
		for _, sp := range mergeSpans(spans) {
			m.From, m.To = append(m.From, sp.from), append(m.To, sp.to)
		}
		emit(ledgerKey(p.topic, p.partition), m)
	}
	clear(fn.byPart)
}

// mergeSpans sorts spans and merges those that touch.
func mergeSpans(spans []span) []span {
	slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.from, b.from) })
	out := spans[:0]
	for _, sp := range spans {
		if n := len(out); n > 0 && sp.from <= out[n-1].to {
			out[n-1].to = max(out[n-1].to, sp.to)
			continue
		}
		out = append(out, sp)
	}
	return out
}

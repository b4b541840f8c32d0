package streaming

import (
	"context"
	"encoding/json"
	"reflect"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beamdedup/beamdedup/coders/keycoder"
	"github.com/beamdedup/beamdedup/internal/rowcol"
	"github.com/beamdedup/beamdedup/pipelines/jsonl"
	"github.com/beamdedup/beamdedup/transforms/deadletter"
	"github.com/beamdedup/beamdedup/transforms/kafkaio"
	"github.com/beamdedup/beamdedup/transforms/pubsubio"
)

func init() {
	register.DoFn2x0[deadletter.DeadLetter, func(kafkaio.Record)](&refusedFn[kafkaio.Record]{})
	register.DoFn2x0[deadletter.DeadLetter, func(pubsubio.Message)](&refusedFn[pubsubio.Message]{})
	register.Emitter3[beam.EventTime, []byte, kafkaio.Record]()
	register.Emitter3[beam.EventTime, []byte, pubsubio.Message]()
	register.Emitter2[[]byte, kafkaio.Record]()
	register.Emitter2[[]byte, pubsubio.Message]()
	register.Emitter1[kafkaio.Record]()
	register.Emitter1[pubsubio.Message]()
}

// Register registers the DoFns of the pipeline for row type T, over
// either source; call it from an init function of the package that
// defines T (orders.Order is registered here).
func Register[T any]() {
	beam.RegisterType(reflect.TypeFor[T]())
	registerFor[T, kafkaio.Record]()
	registerFor[T, pubsubio.Message]()
}

func registerFor[T any, E any]() {
	register.DoFn5x1[context.Context, beam.EventTime, E, func(beam.EventTime, []byte, E), func(E), error](&decodeFn[T, E]{})
	register.DoFn2x1[[]byte, E, E](&outputFn[T, E]{})
	register.DoFn5x1[context.Context, []byte, E, func([]byte, E), func(E), error](&postgresFn[T, E]{})
}

// decodeFn decodes each element's payload into a row of type T, keys the
// element by the row's Columns (keycoder: GROUP BY equality) or, without
// Columns, by its own id; with OnTime it stamps the element (its timestamp
// and its element's) with the row's event time. What does not decode goes
// out as a dead letter with its bytes and the reason.
type decodeFn[T any, E any] struct {
	Input     string   // what is read, named in dead letters
	Namespace string   // of the dead_lettered counter
	Columns   []string // empty: keyed by the element's id
	OnTime    string

	el   elements[E]
	enc  *keycoder.Encoder
	at   rowcol.TimeColumn
	dead beam.Counter
}

func (f *decodeFn[T, E]) Setup() error {
	f.el, f.dead = elementsOf[E](), beam.NewCounter(f.Namespace, deadLettered)
	var err error
	if len(f.Columns) > 0 {
		if f.enc, err = keycoder.New(reflect.TypeFor[T](), f.Columns); err != nil {
			return err
		}
	}
	if f.OnTime != "" {
		f.at, err = rowcol.NewTimeColumn(reflect.TypeFor[T](), f.OnTime)
	}
	return err
}

func (f *decodeFn[T, E]) ProcessElement(ctx context.Context, ts beam.EventTime, e E, rows func(beam.EventTime, []byte, E), dead func(E)) error {
	row, reason := jsonl.ParseRow(reflect.TypeFor[T](), string(f.el.payload(e)))
	v := reflect.ValueOf(row)
	var us int64
	if reason == "" && f.OnTime != "" {
		us, reason = f.at.Read(v)
	}
	if reason != "" {
		f.dead.Inc(ctx, 1)
		dead(f.el.deadLetter(e, reason, f.Input))
		return nil
	}
	if f.OnTime != "" {
		t := time.UnixMicro(us).UTC()
		e, _ = f.el.stamped(e, t)
		ts = mtime.FromTime(t)
	}
	if f.enc == nil {
		rows(ts, f.el.id(e), e)
		return nil
	}
	rows(ts, f.enc.Append(nil, v), e)
	return nil
}

// deadLettered is the name of the pipeline's counter of the elements that
// did not decode.
const deadLettered = "dead_lettered"

// refusedFn turns an element KeepFirst refused back into the element, as
// a dead letter with KeepFirst's reason, so that it is settled once the
// dead letter is written. KeepFirst ran on KV<key, element>: its dead
// letter's row is {"key":…,"value":…}, the value the element under its
// column names.
type refusedFn[E any] struct {
	Input string // what is read, named in dead letters
}

func (f *refusedFn[E]) ProcessElement(d deadletter.DeadLetter, emit func(E)) {
	el := elementsOf[E]()
	var kv struct {
		Value *E `json:"value"`
	}
	e := el.raw([]byte(d.Row))
	if err := json.Unmarshal([]byte(d.Row), &kv); err == nil && kv.Value != nil {
		e = *kv.Value
	}
	// Else not an element: write what there is; it settles nothing.
	emit(el.deadLetter(e, d.Transform+": "+d.Reason, f.Input))
}

// outputFn makes what is written for a kept element (elements.output): the
// element itself, or its row as JSON.
type outputFn[T any, E any] struct{}

func (*outputFn[T, E]) ProcessElement(_ []byte, e E) E {
	el := elementsOf[E]()
	return el.output(e, func() []byte {
		data := el.payload(e) // decodeFn accepted it, so it decodes again
		if row, reason := jsonl.ParseRow(reflect.TypeFor[T](), string(data)); reason == "" {
			if b, err := json.Marshal(row); err == nil { // a struct of JSON-decoded values always encodes
				data = b
			}
		}
		return data
	})
}

package streaming

import (
	"encoding/json"
	"errors"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beamdedup/beamdedup/transforms/deadletter"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/pubsubio"
)

func init() {
	register.DoFn2x0[deadletter.DeadLetter, func(pubsubio.Message)](&refusedFn{})
}

// keepFirst keeps the first message per key of kvs (KV<[]byte,
// pubsubio.Message>). It returns the kept KVs, the dropped ones (to be
// acked where KeepFirst dropped them) and, as dead-letter messages, the
// ones KeepFirst refused (an option of Config.Dedup that reads a column
// of the message, such as OnTime("publish_time"), can refuse one).
func keepFirst(s beam.Scope, kvs beam.PCollection, opts []dedup.Option) (kept, dropped, refused beam.PCollection, err error) {
	res, err := dedup.TryKeepFirst(s, kvs, append(opts, dedup.OutputDropped())...)
	if err != nil {
		return kept, dropped, refused, err
	}
	return res.Rows, res.Dropped, beam.ParDo(s, &refusedFn{}, res.DeadLetters), nil
}

// refusedFn turns a message KeepFirst refused back into the message, as a
// dead letter with KeepFirst's reason, so that it is acked once the dead
// letter is out. KeepFirst ran on KV<key, message>: its dead letter's row
// is {"key":…,"value":…}, the value the message under its column names
// (which are its JSON names).
type refusedFn struct{}

func (*refusedFn) ProcessElement(d deadletter.DeadLetter, emit func(pubsubio.Message)) {
	var kv struct {
		Value *pubsubio.Message `json:"value"`
	}
	m := pubsubio.Message{Data: []byte(d.Row)}
	if err := json.Unmarshal([]byte(d.Row), &kv); err == nil && kv.Value != nil && kv.Value.AckID != "" {
		m = *kv.Value
	}
	// Else not a message: publish what there is; its message is not acked
	// here and comes back after its lease.
	emit(deadLetter(m, errors.New(d.Transform+": "+d.Reason), ""))
}

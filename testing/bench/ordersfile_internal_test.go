package bench

import (
	"encoding/binary"
	"errors"
	"hash/fnv"
	"reflect"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/textio"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beamdedup/beamdedup/pipelines/jsonl"
	"github.com/beamdedup/beamdedup/pipelines/orders"
)

// The runner's floors for the orders file (BenchmarkOrdersFile): the
// shapes of our pipelines over the same file, with nothing of ours in the
// middle. The line floors read the file with textio, key each line by its
// order_id (found in the line, not parsed), and write one line per key:
// through a GroupByKey (the bounded expansion's shape) or a keyed stateful
// DoFn making no state request (the stateful expansion's), each written as
// pipelines/jsonl writes (in chunks of lines); CopyFloor is the read and
// the write alone. The row floors
// are the same with the file parsed into orders.Order and written back by
// pipelines/jsonl: what decoding, schema rows and encoding add to them.

// OrderIDOfLine keys a line of an orders file by the value of its
// order_id, the line itself when it has none.
func OrderIDOfLine(line string) (string, string) {
	const field = `"order_id":"`
	i := strings.Index(line, field)
	if i < 0 {
		return line, line
	}
	id := line[i+len(field):]
	if j := strings.IndexByte(id, '"'); j >= 0 {
		id = id[:j]
	}
	return id, line
}

// FirstOfGroupFn emits the first element of a key's group. (A DoFn type,
// not a generic function: Beam names a function instantiation
// "First[...]" whatever its type, a type by its type argument.)
type FirstOfGroupFn[T any] struct{}

// ProcessElement emits the group's first element.
func (*FirstOfGroupFn[T]) ProcessElement(_ string, vs func(*T) bool, emit func(T)) {
	var v T
	if vs(&v) {
		emit(v)
	}
}

// NoRequestOfFn is NoRequestFn over elements of type T: a keyed stateful
// DoFn that declares a bag and makes no request.
type NoRequestOfFn[T any] struct {
	Seen state.Bag[bool]
}

// NewNoRequestOfFn returns the no-request DoFn over T.
func NewNoRequestOfFn[T any]() *NoRequestOfFn[T] {
	return &NoRequestOfFn[T]{Seen: state.MakeBagState[bool]("seen")}
}

// ProcessElement emits the element.
func (f *NoRequestOfFn[T]) ProcessElement(_ state.Provider, _ string, v T, emit func(T)) error {
	emit(v)
	return nil
}

// ProtocolFloorLineFn is the protocol's floor over lines (as
// ProtocolFloorFn): a read of the key's bag, and for a new key an append
// of a bool and its line emitted; each request waited for.
type ProtocolFloorLineFn struct {
	Seen state.Bag[bool]
}

// NewProtocolFloorLineFn returns the protocol floor over lines.
func NewProtocolFloorLineFn() *ProtocolFloorLineFn {
	return &ProtocolFloorLineFn{Seen: state.MakeBagState[bool]("seen")}
}

// ProcessElement emits the line of a new key.
func (f *ProtocolFloorLineFn) ProcessElement(sp state.Provider, _ string, line string, emit func(string)) error {
	_, seen, err := f.Seen.Read(sp)
	if err != nil || seen {
		return err
	}
	if err := f.Seen.Add(sp, true); err != nil {
		return err
	}
	emit(line)
	return nil
}

// bucketBytes is the size past which BucketLinesFn emits a bucket's batch.
const bucketBytes = 64 << 10

// Buckets is the number of key-hash buckets of the bucketed floor.
const Buckets = 256

// BucketLinesFn batches keyed lines by a hash of their key: one
// KV<bucket, batch> per bucket and bundle (and per bucketBytes), each
// batch the key and line of its rows, length-prefixed: the shape of a
// shuffle that carries a batch an element instead of a row.
type BucketLinesFn struct {
	batches map[uint32][]byte
}

// StartBundle drops what a failed bundle may have left.
func (f *BucketLinesFn) StartBundle(_ func(uint32, []byte)) { f.batches = map[uint32][]byte{} }

// ProcessElement adds the line to its bucket's batch.
func (f *BucketLinesFn) ProcessElement(key, line string, emit func(uint32, []byte)) {
	h := fnv.New32a()
	h.Write([]byte(key))
	b := h.Sum32() % Buckets
	batch := binary.AppendUvarint(f.batches[b], uint64(len(key)))
	batch = append(batch, key...)
	batch = binary.AppendUvarint(batch, uint64(len(line)))
	batch = append(batch, line...)
	if len(batch) >= bucketBytes {
		emit(b, batch)
		batch = nil
	}
	f.batches[b] = batch
}

// FinishBundle emits the bundle's batches.
func (f *BucketLinesFn) FinishBundle(emit func(uint32, []byte)) {
	for b, batch := range f.batches {
		if len(batch) > 0 {
			emit(b, batch)
		}
	}
	clear(f.batches)
}

// FirstLinePerKey emits the first line of each key of a bucket's batches.
func FirstLinePerKey(_ uint32, batches func(*[]byte) bool, emit func(string)) error {
	seen := map[string]bool{}
	var batch []byte
	for batches(&batch) {
		for len(batch) > 0 {
			key, rest, err := cutField(batch)
			if err != nil {
				return err
			}
			line, rest, err := cutField(rest)
			if err != nil {
				return err
			}
			batch = rest
			if !seen[string(key)] {
				seen[string(key)] = true
				emit(string(line))
			}
		}
	}
	return nil
}

// BucketStateFn is the protocol floor per bucket: a keyed stateful DoFn
// over BucketLinesFn's batches that keeps the keys of its bucket seen so
// far in one bag (a batch of keys an element), reads it once per bucket and
// bundle (then from its own cache), and appends the batch's new keys in one
// request: two requests per bucket and bundle instead of two per key.
type BucketStateFn struct {
	Keys state.Bag[[]byte]

	seen map[uint32]map[string]bool // per bucket, this bundle
}

// NewBucketStateFn returns the per-bucket protocol floor.
func NewBucketStateFn() *BucketStateFn {
	return &BucketStateFn{Keys: state.MakeBagState[[]byte]("keys")}
}

// StartBundle forgets the last bundle's buckets.
func (f *BucketStateFn) StartBundle(_ func(string)) { f.seen = map[uint32]map[string]bool{} }

// ProcessElement emits the line of each new key of the batch.
func (f *BucketStateFn) ProcessElement(sp state.Provider, bucket uint32, batch []byte, emit func(string)) error {
	seen := f.seen[bucket]
	if seen == nil {
		seen = map[string]bool{}
		stored, _, err := f.Keys.Read(sp)
		if err != nil {
			return err
		}
		for _, keys := range stored {
			for len(keys) > 0 {
				key, rest, err := cutField(keys)
				if err != nil {
					return err
				}
				seen[string(key)], keys = true, rest
			}
		}
		f.seen[bucket] = seen
	}
	var added []byte
	for len(batch) > 0 {
		key, rest, err := cutField(batch)
		if err != nil {
			return err
		}
		line, rest, err := cutField(rest)
		if err != nil {
			return err
		}
		batch = rest
		if !seen[string(key)] {
			seen[string(key)] = true
			added = binary.AppendUvarint(added, uint64(len(key)))
			added = append(added, key...)
			emit(string(line))
		}
	}
	if len(added) == 0 {
		return nil
	}
	return f.Keys.Add(sp, added)
}

// cutField cuts a length-prefixed field off b.
func cutField(b []byte) (field, rest []byte, err error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || uint64(len(b)-k) < n {
		return nil, nil, errors.New("bench: a truncated batch")
	}
	return b[k : k+int(n)], b[k+int(n):], nil
}

// OrderByID keys an order by its order_id.
func OrderByID(o orders.Order) (string, orders.Order) { return o.OrderID, o }

// The shapes of LinesFloor.
const (
	// Shuffle: a GroupByKey, the first line of each key.
	Shuffle = iota
	// Stateful: a keyed stateful DoFn making no request, every line.
	Stateful
	// Protocol: the protocol floor, the first line of each key.
	Protocol
	// Bucketed: lines batched by key-hash bucket through a GroupByKey,
	// the first line of each key.
	Bucketed
	// BucketedState: the same batches through a stateful DoFn keyed by
	// bucket (BucketStateFn), the first line of each key.
	BucketedState
)

// LinesFloor reads input's lines, keys them by order_id, passes them
// through a floor of shape (Shuffle, Stateful, Protocol, Bucketed,
// BucketedState) and
// writes what comes out to output.
func LinesFloor(s beam.Scope, input, output string, shape int) {
	s = s.Scope("LinesFloor")
	keyed := beam.ParDo(s, OrderIDOfLine, textio.Read(s, input))
	var out beam.PCollection
	switch shape {
	case Stateful:
		out = beam.ParDo(s, NewNoRequestOfFn[string](), keyed)
	case Protocol:
		out = beam.ParDo(s, NewProtocolFloorLineFn(), keyed)
	case BucketedState:
		out = beam.ParDo(s, NewBucketStateFn(), beam.ParDo(s, &BucketLinesFn{}, keyed))
	case Bucketed:
		out = beam.ParDo(s, FirstLinePerKey, beam.GroupByKey(s, beam.ParDo(s, &BucketLinesFn{}, keyed)))
	default:
		out = beam.ParDo(s, &FirstOfGroupFn[string]{}, beam.GroupByKey(s, keyed))
	}
	jsonl.WriteLines(s, output, out)
}

// CopyFloor reads input's lines and writes them to output: the file's
// read and write alone.
func CopyFloor(s beam.Scope, input, output string) {
	s = s.Scope("CopyFloor")
	jsonl.WriteLines(s, output, textio.Read(s, input))
}

// RowsFloor is LinesFloor with the lines parsed into orders.Order and
// written back as JSON Lines by pipelines/jsonl.
func RowsFloor(s beam.Scope, input, output string, stateful bool) error {
	s = s.Scope("RowsFloor")
	rows, _, err := jsonl.Read(s, input, reflect.TypeFor[orders.Order]())
	if err != nil {
		return err
	}
	keyed := beam.ParDo(s, OrderByID, rows)
	var out beam.PCollection
	if stateful {
		out = beam.ParDo(s, NewNoRequestOfFn[orders.Order](), keyed)
	} else {
		out = beam.ParDo(s, &FirstOfGroupFn[orders.Order]{}, beam.GroupByKey(s, keyed))
	}
	jsonl.Write(s, output, out)
	return nil
}

func init() {
	register.Function1x2(OrderIDOfLine)
	register.DoFn3x0[string, func(*string) bool, func(string)](&FirstOfGroupFn[string]{})
	register.Iter1[string]()
	register.Emitter1[string]()
	register.DoFn4x1[state.Provider, string, string, func(string), error](&NoRequestOfFn[string]{})
	register.DoFn4x1[state.Provider, string, string, func(string), error](&ProtocolFloorLineFn{})
	register.DoFn3x0[string, string, func(uint32, []byte)](&BucketLinesFn{})
	register.Emitter2[uint32, []byte]()
	register.Iter1[[]byte]()
	register.Function3x1(FirstLinePerKey)
	register.DoFn4x1[state.Provider, uint32, []byte, func(string), error](&BucketStateFn{})
	register.Function1x2(OrderByID)
	register.DoFn3x0[string, func(*orders.Order) bool, func(orders.Order)](&FirstOfGroupFn[orders.Order]{})
	register.Iter1[orders.Order]()
	register.Emitter1[orders.Order]()
	register.DoFn4x1[state.Provider, string, orders.Order, func(orders.Order), error](&NoRequestOfFn[orders.Order]{})
}

package step

import (
	"bytes"
	"fmt"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
)

// A KV input's key on state per bucket: the bucket step (BucketRows and
// the bucketed stateful DoFns) keys its tables by a key's bytes, so
// EncodeKeys turns a KV input's K into the bytes of Beam's coder of K
// before it, and DecodeKeys turns them back after it. K's coder is
// deterministic for the key types a KV input takes (KeyPairs has made a
// float key canonical), so equal keys have equal bytes.

// EncodeKeys turns KV<K, row> into KV<K's encoding, row>.
type EncodeKeys struct {
	KeyType beam.EncodedType

	enc beam.ElementEncoder
	buf bytes.Buffer
}

func (f *EncodeKeys) Setup() error {
	f.enc = beam.NewElementEncoder(f.KeyType.T)
	return nil
}

func (f *EncodeKeys) ProcessElement(ts beam.EventTime, k beam.U, v beam.V, emit func(beam.EventTime, []byte, beam.V)) error {
	f.buf.Reset()
	if err := f.enc.Encode(k, &f.buf); err != nil {
		return fmt.Errorf("dedup: encoding key %v: %w", k, err)
	}
	emit(ts, bytes.Clone(f.buf.Bytes()), v)
	return nil
}

// DecodeKeys turns KV<K's encoding, row> back into KV<K, row>.
type DecodeKeys struct {
	KeyType beam.EncodedType

	dec beam.ElementDecoder
}

func (f *DecodeKeys) Setup() error {
	f.dec = beam.NewElementDecoder(f.KeyType.T)
	return nil
}

func (f *DecodeKeys) ProcessElement(ts beam.EventTime, k []byte, v beam.V, emit func(beam.EventTime, beam.U, beam.V)) error {
	key, err := f.dec.Decode(bytes.NewReader(k))
	if err != nil {
		return fmt.Errorf("dedup: decoding a key of %v: %w", f.KeyType.T, err)
	}
	emit(ts, key, v)
	return nil
}

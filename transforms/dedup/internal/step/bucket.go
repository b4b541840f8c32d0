package step

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamdedup/beamdedup/transforms/dedup/internal/statecoder"
)

// The bucketed merge: after the in-bundle merge (KeyCandidates with Local)
// a runner still carries one element per key and bundle across the
// shuffle, and on a portable runner that element's cost (its encoding,
// the data plane, the GroupByKey) is most of a row's. Bucket packs a
// bundle's candidates into one batch per bucket of a hash of the key, and
// MergeBucket merges each key of a bucket's batches as MergeGroup merges a
// key's candidates: the same Direction.Merge, the same settlement, the
// same dropped rows. Direction.Merge is commutative and associative, so
// which row a key keeps does not depend on how its candidates were batched.

const (
	// defaultBuckets is the number of key-hash buckets: the elements per
	// bundle that cross the shuffle, at most. A bucket's merge holds the
	// distinct keys of the bucket at once: about the input's keys divided
	// by this.
	defaultBuckets = 1024
	// defaultBucketBytes caps a batch's size: a batch that reaches it is
	// emitted at once, so a bundle holds at most buckets×cap bytes.
	defaultBucketBytes = 64 << 10
)

// Bucket batches a bundle's keyed candidates (KV<key, candidate>, the
// in-bundle merge's output) by a hash of their key into KV<bucket, batch>;
// each batch holds a bundle's candidates of one bucket, each as its key
// and its encoding (appendCandidate), both length-prefixed. A batch is
// emitted when it reaches the size cap and at the bundle's end.
type Bucket struct {
	Buckets  int // 0: defaultBuckets
	MaxBytes int // 0: defaultBucketBytes

	batches map[uint32]*batch
	enc     []byte // a candidate's encoding, reused
}

// batch is a bucket's batch so far, at the earliest of its candidates'
// element times.
type batch struct {
	b  []byte
	ts beam.EventTime
	// BucketRows' order: the latest row's time, and whether a row came
	// before an earlier one's time (the batch is sorted when emitted)
	last      beam.EventTime
	unordered bool
}

// batchEmit emits a bucket's batch.
type batchEmit = func(beam.EventTime, uint32, []byte)

// bucketOf is key's bucket: the same in every worker, as the GroupByKey
// needs (a process-seeded hash would not do).
func bucketOf(key []byte, buckets int) uint32 {
	return crc32.ChecksumIEEE(key) % uint32(cmp.Or(buckets, defaultBuckets))
}

func (f *Bucket) Setup() error {
	f.batches = make(map[uint32]*batch)
	return nil
}

// StartBundle drops what a failed bundle may have left.
func (f *Bucket) StartBundle(_ batchEmit) { clear(f.batches) }

func (f *Bucket) ProcessElement(ts beam.EventTime, key []byte, c candidate, emit batchEmit) {
	k := bucketOf(key, f.Buckets)
	p := f.batches[k]
	if p == nil {
		p = &batch{ts: ts}
		f.batches[k] = p
	}
	p.ts = min(p.ts, ts)
	f.enc = appendCandidate(f.enc[:0], c)
	p.b = binary.AppendUvarint(p.b, uint64(len(key)))
	p.b = append(p.b, key...)
	p.b = binary.AppendUvarint(p.b, uint64(len(f.enc)))
	p.b = append(p.b, f.enc...)
	if len(p.b) >= cmp.Or(f.MaxBytes, defaultBucketBytes) {
		emit(p.ts, k, p.b)
		delete(f.batches, k) // the emitted slice is the runner's now
	}
}

// FinishBundle emits the bundle's batches not emitted yet.
func (f *Bucket) FinishBundle(emit batchEmit) {
	for k, p := range f.batches {
		emit(p.ts, k, p.b)
	}
	clear(f.batches)
}

// MergeBucket merges the candidates of each key of a bucket's batches
// with Merge's rules (MergeGroup.add) and settles each key once
// (MergeGroup.settle), emitting KV<key, row> and, with Dropped, the rows
// that lost. A key's candidates are all in its bucket.
type MergeBucket struct {
	Merge MergeGroup

	merged map[string]*keyed
}

// keyed is a key's merge so far, with the key.
type keyed struct {
	key []byte
	m   candidate
}

func (f *MergeBucket) Setup() error {
	f.merged = make(map[string]*keyed)
	return f.Merge.Setup()
}

func (f *MergeBucket) ProcessElement(ctx context.Context, _ uint32, batches func(*[]byte) bool, emit, drop rowEmit) error {
	clear(f.merged)
	// A candidate's row and sequence value stay slices of its batch, as a
	// candidate decoded by its coder does of its bytes: the SDK decodes
	// each batch into a fresh slice (coder.DecodeBytes).
	var b []byte
	for batches(&b) {
		for len(b) > 0 {
			key, enc, rest, err := nextCandidate(b)
			if err != nil {
				return err
			}
			b = rest
			next, err := DecodeCandidate(enc)
			if err != nil {
				return err
			}
			k := f.merged[string(key)] // no allocation for the lookup
			if k == nil {
				k = &keyed{key: key}
				f.merged[string(key)] = k
			}
			if err := f.Merge.add(key, &k.m, next, drop); err != nil {
				return err
			}
		}
	}
	for _, k := range f.merged {
		if err := f.Merge.settle(ctx, k.key, k.m, emit, drop); err != nil {
			return err
		}
	}
	clear(f.merged)
	return nil
}

// nextCandidate splits a batch's first candidate, its key and its
// encoding, from the rest.
func nextCandidate(b []byte) (key, enc, rest []byte, err error) {
	key, rest, ok := statecoder.LengthPrefixed(b)
	if ok {
		enc, rest, ok = statecoder.LengthPrefixed(rest)
	}
	if !ok {
		return nil, nil, nil, fmt.Errorf("dedup: corrupt candidate batch")
	}
	return key, enc, rest, nil
}

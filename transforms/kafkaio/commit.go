package kafkaio

import (
	"context"
	"fmt"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
)

var recordT = reflect.TypeFor[Record]()

// Commit marks each Record of col safe, at the end of each bundle, for the
// consumer group group of the Read it came from: put it after the step
// that makes a record safe, fused with it (Write's output, a sink's, the
// records a dedup step dropped as duplicates), so that a bundle whose sink
// failed marks nothing. A partition's offset is committed for the group,
// at most every CommitInterval, once every record before it is safe.
//
// Commit marks a record in its reader's process; one whose reader runs in
// another process (several SDK workers) is counted (records_unheld) and
// commits nothing (see the package doc). It panics on invalid arguments;
// TryCommit returns the error.
func Commit(s beam.Scope, group string, col beam.PCollection, opts ...Option) {
	if err := TryCommit(s, group, col, opts...); err != nil {
		panic(err)
	}
}

// TryCommit is Commit returning construction errors.
func TryCommit(s beam.Scope, group string, col beam.PCollection, opts ...Option) error {
	var errs []error
	if group == "" {
		errs = append(errs, fmt.Errorf("no group; want the Group of the Read"))
	}
	if got := col.Type().Type(); got != recordT {
		errs = append(errs, fmt.Errorf("needs a PCollection<kafkaio.Record>, got %v", got))
	}
	if _, err := newConfig("kafkaio.Commit", commitOptions, opts, errs...); err != nil {
		return err
	}
	beam.ParDo0(s.Scope("kafkaio.Commit"), &commitFn{Group: group}, col)
	return nil
}

// position is a record's place in its partition.
type position struct {
	topic     string
	partition int32
	offset    int64
}

type commitFn struct {
	Group string

	marks []position
}

func (fn *commitFn) StartBundle(context.Context) { fn.marks = fn.marks[:0] }

func (fn *commitFn) ProcessElement(_ context.Context, r Record) {
	fn.marks = append(fn.marks, position{r.Topic, r.Partition, r.Offset})
}

// FinishBundle marks the bundle's records safe in their runs, and
// commits at once what is safe of the partitions whose reader ended, so
// that the job does not end before their last offsets are committed.
func (fn *commitFn) FinishBundle(ctx context.Context) {
	var safe, unheld int64
	var last *run
	marked := map[*run]bool{}
	for _, m := range fn.marks {
		if last == nil || last.topic != m.topic {
			last = lookupRun(fn.Group, m.topic)
		}
		if last.markSafe(m.partition, m.offset, m.offset+1) {
			safe++
			marked[last] = true
		} else {
			unheld++
		}
	}
	for r := range marked {
		r.flushEnded(ctx)
	}
	cSafe.Inc(ctx, safe)
	cUnheld.Inc(ctx, unheld)
	fn.marks = fn.marks[:0]
}

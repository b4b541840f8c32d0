package kafkaio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/rtrackers/offsetrange"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/beamdedup/beamdedup/internal/unbounded"
)

// A partBundle is one bundle of a partition's reader.
type partBundle struct {
	*unbounded.Bundle
	fn     *readFn
	p      partition
	rt     *sdf.LockRTracker
	pr     *partReader
	bounds *inFlight // nil without a Group or MaxInFlight
	keep   bool      // the client's position is known: back to the pool at the end
}

// pollBatch bounds the records one poll returns.
const pollBatch = 1000

// startBundle starts a bundle at the restriction's start.
func (fn *readFn) startBundle(ctx context.Context, we *unbounded.Watermark, rt *sdf.LockRTracker, p partition) (*partBundle, error) {
	from := rt.GetRestriction().(offsetrange.Restriction).Start
	var bounds *inFlight
	if fn.Group != "" && fn.MaxInFlight > 0 {
		bounds = inFlightOf(fn.adm, fn.Brokers, fn.Group, fn.Topic)
		bounds.started(p.Partition, from)
	}
	pr, err := acquireReader(fn.Brokers, fn.Topic, p.Partition, from)
	if err != nil {
		return nil, fmt.Errorf("kafkaio: a reader of topic %s partition %d on %s: %w", fn.Topic, p.Partition, fn.Brokers, err)
	}
	return &partBundle{Bundle: fn.Reading.Start(ctx, we, "topic "+fn.Topic, &fn.controlWarned),
		fn: fn, p: p, rt: rt, pr: pr, bounds: bounds, keep: true}, nil
}

// close counts what the bundle read and pools or closes its client.
func (b *partBundle) close(ctx context.Context) {
	cRead.Inc(ctx, int64(b.Emitted()))
	if !b.keep {
		b.pr.cl.Close()
		return
	}
	readersMu.Lock()
	defer readersMu.Unlock()
	idle[b.pr.key] = append(idle[b.pr.key], b.pr)
}

// end ends the partition's reader, on request or idle. Once every reader
// has ended, Commit's ledgers commit what the readers passed over after
// their last records (ledgerFn.OnTimer).
func (b *partBundle) end(context.Context) sdf.ProcessContinuation {
	finish(b.rt)
	b.Ended()
	if b.fn.Watched {
		watchOf(b.fn.Reading.RunID).readerEnded()
	}
	b.keep = false
	return sdf.StopProcessing()
}

// room is how many records the next poll may return, and held when
// MaxInFlight allows none.
func (b *partBundle) room(ctx context.Context) (want int, held bool) {
	want = min(pollBatch, b.Left())
	if b.bounds == nil {
		return want, false
	}
	room := b.bounds.room(ctx, b.p.Partition, b.pr.next, b.fn.MaxInFlight)
	return min(want, room), room <= 0
}

// failTimeout is how long a reader's fetches may fail with retriable
// errors before the reader fails its bundle.
const failTimeout = 30 * time.Second

// poll fetches at most want records until the bundle's deadline. A fetch
// failing with a retriable error (a restarting broker, a moving leader)
// is not answered, until failTimeout: then the bundle fails rather than
// wait silently.
func (b *partBundle) poll(ctx context.Context, want int) (recs []*kgo.Record, answered bool, err error) {
	pctx, cancel := context.WithDeadline(ctx, b.Deadline())
	fetches := b.pr.cl.PollRecords(pctx, want)
	cancel()
	if ctx.Err() != nil {
		return nil, false, ctx.Err()
	}
	if err := fetchError(fetches); err != nil {
		if b.pr.failing.IsZero() {
			b.pr.failing = time.Now()
		}
		if !retriable(err) || time.Since(b.pr.failing) >= failTimeout {
			b.keep = false
			return nil, false, fmt.Errorf("kafkaio: reading topic %s partition %d on %s failed (for %v): %w; a rerun reads on from the group's committed offsets",
				b.fn.Topic, b.p.Partition, b.fn.Brokers, time.Since(b.pr.failing).Round(time.Second), err)
		}
		return nil, false, nil
	}
	b.pr.failing = time.Time{}
	fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
		// Read committed: the partition ends, for the reader, at its last
		// stable offset (an open transaction's records are not read yet).
		if fp.LastStableOffset > 0 {
			b.pr.hwm.Store(fp.LastStableOffset)
		}
	})
	return fetches.Records(), true, nil
}

// idle takes an empty poll: a caught-up reader moves the watermark to the
// wall clock less the lag, and reports whether IdleStop has passed.
func (b *partBundle) idle(ctx context.Context) bool {
	if !b.fn.caughtUp(ctx, b.pr) {
		return false
	}
	b.CaughtUp()
	return b.Idle(b.pr.lastData)
}

// emit claims and emits recs, each with its Record.Skipped, and moves the
// watermark. It reports stop when the restriction ends before them (a
// split: what follows is another reader's).
func (b *partBundle) emit(ctx context.Context, recs []*kgo.Record, emit func(beam.EventTime, Record)) (stop bool, err error) {
	b.pr.lastData = time.Now()
	var newest time.Time
	for _, kr := range recs {
		if kr.Offset < b.pr.next {
			continue // fetched before a reset; not this range's
		}
		if kr.Attrs.IsControl() {
			// A transaction marker: not claimed, so that a resumed reader
			// accounts for it in its next record's Skipped.
			b.pr.next = kr.Offset + 1
			continue
		}
		if !b.rt.TryClaim(kr.Offset) {
			b.keep = false
			if b.rt.IsDone() {
				return true, nil
			}
			return false, fmt.Errorf("kafkaio: claiming offset %d of topic %s partition %d: %v", kr.Offset, b.fn.Topic, b.p.Partition, b.rt.GetError())
		}
		b.pr.next = kr.Offset + 1
		skipped := kr.Offset - b.pr.since
		b.pr.since = b.pr.next
		if kr.Timestamp.After(newest) {
			newest = kr.Timestamp
		}
		b.Claim(1)
		r := fromKgo(kr)
		r.Skipped = skipped
		emit(mtime.FromTime(kr.Timestamp), r)
	}
	if !newest.IsZero() {
		b.Advance(newest)
	}
	b.rt.Rt.(*tracker).end.Store(max(b.pr.hwm.Load(), b.pr.next))
	if b.fn.caughtUp(ctx, b.pr) {
		b.CaughtUp()
	}
	return false, nil
}

// caughtUp reports whether the reader has read to the partition's last
// stable offset, as last fetched or listed (at most once a second). A
// broker that does not answer is not caught up.
func (fn *readFn) caughtUp(ctx context.Context, pr *partReader) bool {
	if hwm := pr.hwm.Load(); hwm >= 0 && pr.next >= hwm {
		return true
	}
	if time.Since(pr.lastCheck) < time.Second {
		return false
	}
	pr.lastCheck = time.Now()
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	l, err := fn.adm.ListCommittedOffsets(lctx, fn.Topic)
	if err != nil {
		return false
	}
	if o, ok := l.Lookup(fn.Topic, pr.partition); ok && o.Err == nil {
		pr.hwm.Store(o.Offset)
		return pr.next >= o.Offset
	}
	return false
}

// retry calls f until it returns nil or a non-retriable error, for at
// most 30s.
func retry(ctx context.Context, f func() error) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := f()
		if err == nil || !kerr.IsRetriable(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// retriable reports whether a fetch may succeed if tried again.
func retriable(err error) bool {
	var ne net.Error
	return kerr.IsRetriable(err) || errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNREFUSED)
}

// fetchError is the first error of a poll that is not its own deadline.
func fetchError(fs kgo.Fetches) error {
	for _, e := range fs.Errors() {
		if errors.Is(e.Err, context.DeadlineExceeded) || errors.Is(e.Err, context.Canceled) {
			continue
		}
		return e.Err
	}
	return nil
}

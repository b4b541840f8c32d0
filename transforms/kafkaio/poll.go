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

// A partBundle is one bundle of a partition's reader: its budget, control
// and watermark (unbounded.Bundle), the partition's pooled client
// (clients.go), its restriction, and its read-ahead bound (inflight.go;
// nil without a Group or a bound).
type partBundle struct {
	*unbounded.Bundle
	fn     *readFn
	p      partition
	rt     *sdf.LockRTracker
	pr     *partReader
	bounds *inFlight
	keep   bool // the client's position is known: back to the pool at the end
}

// pollBatch bounds the records one poll returns.
const pollBatch = 1000

// startBundle starts a bundle at the restriction's start, where a pooled
// client positioned there reads on.
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

// close counts what the bundle read and pools its client, or closes it
// when its position is no longer known.
func (b *partBundle) close(ctx context.Context) {
	cRead.Inc(ctx, int64(b.Emitted()))
	if b.keep {
		releaseReader(b.pr)
	} else {
		discardReader(b.pr)
	}
}

// end ends the partition's reader, on request or idle: what it emitted
// commits with this bundle, and the partition is done. Once every reader
// has ended, the job's input ends, and Commit's ledgers commit what the
// readers passed over after their last records: a clean end leaves no
// offset behind.
func (b *partBundle) end(context.Context) sdf.ProcessContinuation {
	finish(b.rt)
	b.Ended()
	if b.fn.Watched {
		watchOf(b.fn.Reading.RunID).readerEnded()
	}
	b.keep = false
	return sdf.StopProcessing()
}

// room is how many records the next poll may return: what is left of the
// bundle's budget, bounded with MaxInFlight by how far the reader may
// still read ahead of its group's committed offset; held when that is
// nothing.
func (b *partBundle) room(ctx context.Context) (want int, held bool) {
	want = min(pollBatch, b.Left())
	if b.bounds == nil {
		return want, false
	}
	room := b.bounds.room(ctx, b.p.Partition, b.pr.next, b.fn.MaxInFlight)
	return min(want, room), room <= 0
}

// failTimeout is how long a reader's fetches may fail with errors Kafka
// calls retriable (a restarting broker, a topic deleted under it) before
// the reader fails its bundle.
const failTimeout = 30 * time.Second

// poll fetches at most want records until the bundle's deadline. A fetch
// that fails with an error Kafka calls retriable (a broker restarting, a
// leader moving: kgo retries) is not answered; past failTimeout of such
// failures the bundle fails, naming the topic and the brokers, rather than
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

// idle takes an empty poll: a reader caught up with its partition's end
// moves the watermark to the wall clock less the lag, and reports whether
// no record came for IdleStop.
func (b *partBundle) idle(ctx context.Context) bool {
	if !b.fn.caughtUp(ctx, b.pr) {
		return false
	}
	b.CaughtUp()
	return b.Idle(b.pr.lastData)
}

// emit claims and emits recs, each with the offsets the reader passed over
// before it (Record.Skipped), and moves the watermark. It reports stop when the restriction ends
// before them (a split: what follows is another reader's, and this client
// is past it).
func (b *partBundle) emit(ctx context.Context, recs []*kgo.Record, emit func(beam.EventTime, Record)) (stop bool, err error) {
	b.pr.lastData = time.Now()
	var newest time.Time
	for _, kr := range recs {
		if kr.Offset < b.pr.next {
			continue // fetched before a reset; not this range's
		}
		if kr.Attrs.IsControl() {
			// A transaction's commit or abort marker: passed over, not
			// claimed, so that the restriction (what a runner checkpoints)
			// resumes after the last record emitted, and a resumed reader
			// accounts for the marker in its next record's Skipped.
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
		// Passed over since the last record emitted: markers, an aborted
		// transaction's records, records a compaction removed.
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

// caughtUp reports whether the reader has read to the partition's end (its
// last stable offset: read committed), as last seen; with no fetch to
// say, it lists the end offset, at most once a second. A partition whose
// last entry is a transaction's marker ends after it: the reader, which
// gets the markers (KeepControlRecords), passes over them. A broker that
// does not answer is not caught up.
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

// retry calls f until it returns nil or an error Kafka does not call
// retriable (a group coordinator that is still loading, say), at most for
// 30s or ctx's deadline.
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

// retriable reports whether a fetch may succeed if tried again: a network
// error, or a Kafka error marked retriable.
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

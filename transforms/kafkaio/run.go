package kafkaio

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/beamdedup/beamdedup/internal/unbounded"
)

// A run is one Read with a Group, as this process sees it: for each
// partition its reader reads here, a ledger of the offsets that are safe
// (ledger.go), and a committer that commits, for the group, the offset
// below which every one is.
//
// An offset is safe when Commit marked its record (the pipeline wrote
// it, dead-lettered it, or dropped it as a duplicate), or when the reader
// passed over it without emitting a record (a transaction marker, a
// compacted gap). The group's offset of a partition is the end of the run
// of safe offsets from where the reader started: a record that is not
// safe holds back every offset after it, so a crash at any moment loses no
// record, and reads again at most the records after the first unsafe one.
//
// While a partition's reader runs, what became safe is committed at most
// every CommitInterval; once it has ended (idle, or on request), at once:
// when it ends, and at the end of each Commit bundle that marks its
// records, so that a job that ends by itself has committed every offset
// it read before it ends.
//
// Runs live in process memory: Commit marks a record in the run of its
// reader's process. Where Commit runs in another process (several SDK
// workers), it cannot, counts the record as unheld, and commits nothing
// for it: the group's offsets then stop at the first such record (the
// runner's own checkpoint of the restriction is the position there).
type run struct {
	id, group, topic string
	adm              *kadm.Client
	brokers          string
	interval         time.Duration

	turn      sync.Mutex // held by a commit, from what is due to the answer
	mu        sync.Mutex
	parts     map[int32]*ledger
	endedAt   map[int32]bool  // partitions whose reader ended in this process
	committed map[int32]int64 // the last offset committed, by partition
	poke      chan struct{}
	stop      chan struct{}
	stopped   bool
	failing   bool // the last commit failed (warned once per streak)
	unbounded bool // MaxInFlight given up: nothing became safe in this process
}

// inFlightPatience is how long a reader may be held at MaxInFlight while
// nothing of its partition becomes safe before its run gives the bound up.
var inFlightPatience = time.Minute

// runs are this process's runs, by group and topic: a newer Read of the
// same group and topic (a job started after another in the same process)
// replaces the older one.
var (
	runsMu sync.Mutex
	runs   = map[string]*run{}
)

func runKey(group, topic string) string { return group + "\x00" + topic }

// runFor returns fn's run in this process, creating it (and ending an
// older one of its group and topic) on first use; nil without a Group.
// Closing the Read's Control commits what is safe and ends the run.
func runFor(ctx context.Context, fn *readFn) (*run, error) {
	if fn.Group == "" {
		return nil, nil
	}
	runsMu.Lock()
	defer runsMu.Unlock()
	key := runKey(fn.Group, fn.Topic)
	if r, ok := runs[key]; ok {
		if r.id == fn.Reading.RunID {
			return r, nil
		}
		r.end()
	}
	adm, err := adminFor(fn.Brokers)
	if err != nil {
		return nil, err
	}
	r := &run{id: fn.Reading.RunID, group: fn.Group, topic: fn.Topic, adm: adm, brokers: fn.Brokers,
		interval: time.Duration(fn.CommitIntervalMs) * time.Millisecond,
		parts:    map[int32]*ledger{}, endedAt: map[int32]bool{}, committed: map[int32]int64{},
		poke: make(chan struct{}, 1), stop: make(chan struct{})}
	runs[key] = r
	go r.commitLoop()
	unbounded.LookupControl(ctx, fn.Reading.Control, "topic "+fn.Topic, &fn.controlWarned).OnClose(func(ctx context.Context) error {
		err := r.commit(ctx)
		runsMu.Lock()
		defer runsMu.Unlock()
		r.end()
		return err
	})
	return r, nil
}

// lookupRun is the run of group and topic in this process, or nil.
func lookupRun(group, topic string) *run {
	runsMu.Lock()
	defer runsMu.Unlock()
	return runs[runKey(group, topic)]
}

// started registers the partition's reader at offset start: the first
// restriction of a partition this run sees sets where its safe offsets
// begin (a later one, a split's residual or the next bundle, starts at or
// after it).
func (r *run) started(partition int32, start int64) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.parts[partition]; !ok {
		r.parts[partition] = &ledger{base: start, moved: time.Now()}
	}
}

// ended notes that the partition's reader ended here, and commits what is
// safe now: from here on, what becomes safe of the partition is committed
// at once (flushEnded).
func (r *run) ended(ctx context.Context, partition int32) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.endedAt[partition] = true
	r.mu.Unlock()
	r.flush(ctx)
}

// flushEnded commits what is due of the partitions whose reader ended, at
// once (Commit calls it at the end of each bundle it marked in).
func (r *run) flushEnded(ctx context.Context) {
	if r == nil {
		return
	}
	r.mu.Lock()
	due := false
	for p := range r.endedAt {
		if l := r.parts[p]; l != nil && l.base > r.committedOf(p) {
			due = true
		}
	}
	r.mu.Unlock()
	if due {
		r.flush(ctx)
	}
}

// committedOf is the offset committed of partition, -1 for none; r.mu is
// held.
func (r *run) committedOf(partition int32) int64 {
	if c, ok := r.committed[partition]; ok {
		return c
	}
	return -1
}

// flush commits what is due now, for at most 10s; a failure is warned
// and left to the commit loop's next turn (the offsets stay behind, which
// loses nothing).
func (r *run) flush(ctx context.Context) {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := r.commit(fctx); err != nil {
		log.Warnf(ctx, "%v (retried)", err)
		r.pokeLoop()
	}
}

// room is how many records the reader of partition, next to read offset
// next, may read before it is bound records ahead of the partition's safe
// offset; 0 holds it. A reader held for inFlightPatience while nothing of
// its partition became safe means the marks do not reach this process
// (Commit runs in another SDK worker): the run then warns once and bounds
// nothing more.
func (r *run) room(ctx context.Context, partition int32, next int64, bound int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	l, ok := r.parts[partition]
	if !ok || r.unbounded {
		return bound
	}
	if ahead := max(next-l.base, 0); ahead < int64(bound) {
		l.held = time.Time{}
		return bound - int(ahead)
	}
	if l.held.IsZero() {
		l.held = time.Now()
	}
	since := l.held
	if l.moved.After(since) {
		since = l.moved
	}
	if time.Since(since) < inFlightPatience {
		return 0
	}
	r.unbounded = true
	log.Warnf(ctx, "kafkaio: the reader of topic %s partition %d was held at MaxInFlight(%d) for %v and no record of it became safe in this process: Commit runs in another SDK worker process, so the group's offsets do not move from here (see the package doc); reading on without the bound (set MaxInFlight(0) for such a runner)",
		r.topic, partition, bound, inFlightPatience)
	return bound
}

// markSafe marks [from, to) of partition safe; it reports false when the
// run has no ledger of the partition (its reader runs elsewhere).
func (r *run) markSafe(partition int32, from, to int64) bool {
	if r == nil {
		return false
	}
	r.mu.Lock()
	l, ok := r.parts[partition]
	if ok {
		l.markSafe(from, to)
	}
	r.mu.Unlock()
	if ok {
		r.pokeLoop()
	}
	return ok
}

func (r *run) pokeLoop() {
	select {
	case r.poke <- struct{}{}:
	default:
	}
}

// due are the offsets to commit: each partition's base that moved since
// its last commit.
func (r *run) due() kadm.Offsets {
	r.mu.Lock()
	defer r.mu.Unlock()
	var os kadm.Offsets
	for p, l := range r.parts {
		if l.base <= r.committedOf(p) {
			continue
		}
		if os == nil {
			os = kadm.Offsets{}
		}
		os.Add(kadm.Offset{Topic: r.topic, Partition: p, At: l.base, LeaderEpoch: -1})
	}
	return os
}

// commit commits what is due and returns the first error. Commits take
// turns, so that a later one never lands before an earlier one.
func (r *run) commit(ctx context.Context) error {
	r.turn.Lock()
	defer r.turn.Unlock()
	os := r.due()
	if len(os) == 0 {
		return nil
	}
	resp, err := r.adm.CommitOffsets(ctx, r.group, os)
	if err == nil {
		err = resp.Error()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ps := range resp {
		for p, o := range ps {
			if o.Err == nil && o.At > r.committedOf(p) {
				r.committed[p] = o.At
			}
		}
	}
	if err != nil {
		return fmt.Errorf("kafkaio: committing offsets of group %s on %s for topic %s: %w", r.group, r.brokers, r.topic, err)
	}
	return nil
}

// commitLoop commits what became safe, at most every interval, until the
// run ends. A failed commit is retried at the next turn: the offsets stay
// where they were, which loses nothing.
func (r *run) commitLoop() {
	ctx := context.Background()
	for {
		select {
		case <-r.stop:
			return
		case <-r.poke:
		}
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := r.commit(cctx)
		cancel()
		r.mu.Lock()
		warn := err != nil && !r.failing
		r.failing = err != nil
		r.mu.Unlock()
		if warn {
			log.Warnf(ctx, "%v (retried; the group's offsets stay behind until it works, and a restart reads those records again)", err)
		}
		if err != nil {
			r.pokeLoop()
		}
		select {
		case <-r.stop:
			return
		case <-time.After(r.interval):
		}
	}
}

// end stops the committer; runsMu is held.
func (r *run) end() {
	if runs[runKey(r.group, r.topic)] == r {
		delete(runs, runKey(r.group, r.topic))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.stopped {
		r.stopped = true
		close(r.stop)
	}
}

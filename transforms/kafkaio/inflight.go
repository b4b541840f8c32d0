package kafkaio

import (
	"context"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/twmb/franz-go/pkg/kadm"
)

// inFlight is the MaxInFlight bookkeeping of a group's readers of a topic
// in this process. The bound counts from the group's committed offset,
// read from Kafka (Commit may run in another process).
type inFlight struct {
	mu        sync.Mutex
	adm       *kadm.Client
	group     string
	topic     string
	read      time.Time       // when the offsets were last read
	committed map[int32]int64 // the group's committed offsets
	startedAt map[int32]int64 // where each partition's reader started in this process
	moved     map[int32]time.Time
	held      map[int32]time.Time // since when a partition's reader is held; absent: it is not
	unbounded bool                // the bound given up: nothing became safe while held
}

// committedPoll is how often a held reader reads its group's offsets.
const committedPoll = 200 * time.Millisecond

// inFlightPatience is how long a reader may be held at MaxInFlight while
// its group's offset does not move before the bound is given up.
var inFlightPatience = time.Minute

var inFlights sync.Map // brokers, group and topic -> *inFlight

func inFlightOf(adm *kadm.Client, brokers, group, topic string) *inFlight {
	v, _ := inFlights.LoadOrStore(brokers+"\x00"+group+"\x00"+topic, &inFlight{adm: adm, group: group, topic: topic,
		committed: map[int32]int64{}, startedAt: map[int32]int64{}, moved: map[int32]time.Time{}, held: map[int32]time.Time{}})
	return v.(*inFlight)
}

// started notes where a partition's reader started in this process: its
// bound counts from there until the group commits an offset.
func (f *inFlight) started(partition int32, start int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.startedAt[partition]; !ok {
		f.startedAt[partition] = start
	}
}

// room is how many records the reader of partition, at offset next, may
// read before it is bound records ahead of the group's committed offset;
// 0 holds it. Held for inFlightPatience with the offset not moving, the
// bound is given up, with a warning, until the group's offset moves.
func (f *inFlight) room(ctx context.Context, partition int32, next int64, bound int) int {
	f.refresh(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.unbounded {
		return bound
	}
	from, ok := f.committed[partition]
	if !ok {
		from = f.startedAt[partition]
	}
	if ahead := max(next-from, 0); ahead < int64(bound) {
		delete(f.held, partition)
		return bound - int(ahead)
	}
	since, ok := f.held[partition]
	if !ok {
		since = time.Now()
		f.held[partition] = since
	}
	if m := f.moved[partition]; m.After(since) {
		since = m
	}
	if time.Since(since) < inFlightPatience {
		return 0
	}
	f.unbounded = true
	log.Warnf(ctx, "kafkaio: the reader of topic %s partition %d was held at MaxInFlight(%d) for %v and group %s committed nothing more: no Commit marks its records safe (or its commits fail); reading on without the bound",
		f.topic, partition, bound, inFlightPatience, f.group)
	return bound
}

// refresh reads the group's committed offsets when they are older than
// committedPoll; a failure keeps the last ones (the reader stays held).
func (f *inFlight) refresh(ctx context.Context) {
	f.mu.Lock()
	if time.Since(f.read) < committedPoll {
		f.mu.Unlock()
		return
	}
	f.read = time.Now()
	f.mu.Unlock()
	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := f.adm.FetchOffsets(fctx, f.group)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for p, o := range resp[f.topic] {
		if o.At < 0 {
			continue
		}
		if old, ok := f.committed[p]; !ok || o.At > old {
			f.committed[p], f.moved[p] = o.At, time.Now()
			if ok { // moving again: the bound holds again
				f.unbounded = false
			}
		}
	}
}

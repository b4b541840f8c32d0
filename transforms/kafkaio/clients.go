package kafkaio

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Admin clients are safe for concurrent use, so every DoFn instance in a
// worker process shares one per broker list for the process's life.
var (
	adminsMu sync.Mutex
	admins   = map[string]*kadm.Client{}
)

// adminFor is the process's admin client of brokers.
func adminFor(brokers string) (*kadm.Client, error) {
	adminsMu.Lock()
	defer adminsMu.Unlock()
	if a, ok := admins[brokers]; ok {
		return a, nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(splitBrokers(brokers)...))
	if err != nil {
		return nil, err
	}
	a := kadm.NewClient(cl)
	admins[brokers] = a
	return a, nil
}

// A partReader is a client that consumes one partition, kept in the
// process between the bundles of its reader: its fetch buffer and its
// position carry over, so a bundle that resumes where the last one ended
// reads on without a new connection or a seek.
type partReader struct {
	key       string
	topic     string
	partition int32
	cl        *kgo.Client
	next      int64 // the offset of the next record the reader expects
	since     int64 // the first offset no emitted record accounts for (Record.Skipped)

	hwm       atomic.Int64 // the partition's end (last stable) offset as last seen; -1: unknown
	lastCheck time.Time    // when the end offset was last listed
	lastData  time.Time    // when a record last came (IdleStop)
	failing   time.Time    // since when fetches fail (zero: they do not)
}

var (
	readersMu sync.Mutex
	idle      = map[string][]*partReader{} // by brokers, topic and partition
)

func readerKey(brokers, topic string, partition int32) string {
	return fmt.Sprintf("%s\x00%s\x00%d", brokers, topic, partition)
}

// acquireReader returns a reader of the partition positioned at offset
// start: an idle one of this process that stopped there (its last record
// emitted before start, the markers it passed over since counted), else
// a new client. A reader at another position (the restriction was split,
// or restored from a checkpoint) is closed rather than moved: records it
// fetched ahead must not be mistaken for the new range's.
func acquireReader(brokers, topic string, partition int32, start int64) (*partReader, error) {
	key := readerKey(brokers, topic, partition)
	readersMu.Lock()
	var stale []*partReader
	var found *partReader
	for i, r := range idle[key] {
		if r.since == start {
			found = r
			idle[key] = append(idle[key][:i:i], idle[key][i+1:]...)
			break
		}
	}
	if found == nil {
		stale, idle[key] = idle[key], nil
	}
	readersMu.Unlock()
	for _, r := range stale {
		r.cl.Close()
	}
	if found != nil {
		return found, nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(splitBrokers(brokers)...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().At(start)}}),
		// An offset the partition no longer holds (deleted by retention)
		// resumes at its first one; what retention deleted is gone.
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		// Only committed records (a transaction's records once it
		// committed, an aborted one's never), and the transactions'
		// markers, so that the reader knows it passed them.
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		return nil, err
	}
	r := &partReader{key: key, topic: topic, partition: partition, cl: cl, next: start, since: start, lastData: time.Now()}
	r.hwm.Store(-1)
	return r, nil
}

// releaseReader keeps r for the reader's next bundle in this process.
func releaseReader(r *partReader) {
	readersMu.Lock()
	defer readersMu.Unlock()
	idle[r.key] = append(idle[r.key], r)
}

// discardReader closes a reader whose position is no longer known.
func discardReader(r *partReader) { r.cl.Close() }

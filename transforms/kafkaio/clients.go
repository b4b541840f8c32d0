package kafkaio

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The process's admin clients, one per broker list.
var (
	adminsMu sync.Mutex
	admins   = map[string]*kadm.Client{}
)

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

// A partReader is a client that consumes one partition, pooled in the
// process between its reader's bundles, so that a bundle that resumes
// where the last one ended reads on without a new connection or a seek.
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

// acquireReader returns a reader of the partition positioned at offset
// start: a pooled one that stopped there, else a new client. A pooled
// reader at another position (a split, a restore) is closed rather than
// moved: records it fetched ahead must not be mistaken for the new range's.
func acquireReader(brokers, topic string, partition int32, start int64) (*partReader, error) {
	key := fmt.Sprintf("%s\x00%s\x00%d", brokers, topic, partition)
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
	// An offset retention deleted resumes at the partition's first.
	cl, err := newConsumer(brokers, topic, partition, start, 500*time.Millisecond, kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return nil, err
	}
	r := &partReader{key: key, topic: topic, partition: partition, cl: cl, next: start, since: start, lastData: time.Now()}
	r.hwm.Store(-1)
	return r, nil
}

// newConsumer is a client reading partition from offset from as a reader
// does: committed records only, with the transactions' markers, so that
// it knows it passed them.
func newConsumer(brokers, topic string, partition int32, from int64, maxWait time.Duration, opts ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append(opts, kgo.SeedBrokers(splitBrokers(brokers)...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().At(from)}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(), kgo.FetchMaxWait(maxWait))...)
}

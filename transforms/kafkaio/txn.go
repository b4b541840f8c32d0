package kafkaio

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/timers"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	beam.RegisterType(reflect.TypeFor[txnState]())
}

const (
	// txnShards is how many writers a transactional Write has: each one's
	// records go to Kafka in a transaction per bundle, under transactional
	// ids of its own.
	txnShards = 4
	// txnTimeout is the transactions' timeout: a transaction left open by a
	// failure is committed, by the job restored from the checkpoint that
	// holds it, within this (Kafka's default transaction.max.timeout.ms).
	txnTimeout = 15 * time.Minute
)

// txnState is what a shard's writer keeps in the job's state: the
// transactions written and not yet known committed.
type txnState struct {
	// Slots is how many transactional ids the shard has used.
	Slots int32
	// Pending are the transactions written and not yet known committed.
	Pending []txnEntry
}

// txnEntry is a transaction written by a bundle and not yet known
// committed. A job restored from a checkpoint holding it commits it: it
// was written before the checkpoint.
type txnEntry struct {
	Slot     int32
	Producer int64
	Epoch    int32
	// Written is when the bundle began it, Unix milliseconds: before the
	// job's last restore, it came with the restored state.
	Written int64
}

// The transactions this process committed, to drop from their shard's
// state, and the restore each shard was last settled for, by shard: a
// runner may run a shard's bundles on any of a process's instances.
var (
	txnMu        sync.Mutex
	txnCommitted = map[string]bool{}      // by transactional id, producer and epoch
	txnSettled   = map[string]time.Time{} // by Write and shard
)

func committedKey(id string, producer int64, epoch int32) string {
	return fmt.Sprintf("%s/%d/%d", id, producer, epoch)
}

// shardFn keys each record by its writer shard: records of one key go to
// one shard, and so keep their order.
type shardFn struct{}

func (*shardFn) ProcessElement(r Record) (int64, Record) {
	b := r.Key
	if b == nil {
		b = r.Value
	}
	// FNV-1a inline: no hasher allocated per record.
	h := uint32(2166136261)
	for _, c := range b {
		h = (h ^ uint32(c)) * 16777619
	}
	return int64(h % txnShards), r
}

// txnWriteFn writes a shard's records of a bundle in one Kafka
// transaction. Without a checkpoint watch (Prism; a Flink job on an
// embedded cluster) it commits at the bundle's end. On a Flink cluster the
// bundle flushes the transaction, keeps it in the shard's state, and the
// transaction is committed once a checkpoint after the bundle completes;
// a job restored from a checkpoint commits the transactions it holds, and
// fences those written after it (their input is read again).
type txnWriteFn struct {
	Brokers, Topic, ID string
	TimeoutMs          int64
	State              state.Value[txnState]
	// Settle fires after a restore for a shard that gets no records.
	Settle timers.ProcessingTime

	ctl *kgo.Client
	cps *checkpointWatch

	open   map[int64]*openTxn // the bundle's, by shard
	bundle bundleWrites
}

type openTxn struct {
	cl       *kgo.Client
	slot     int32
	producer int64
	epoch    int16
}

func (fn *txnWriteFn) txnID(shard int64, slot int32) string {
	return fmt.Sprintf("%s-%s-%d-%d", fn.ID, fn.Topic, shard, slot)
}

func (fn *txnWriteFn) timeout() time.Duration { return time.Duration(fn.TimeoutMs) * time.Millisecond }

func (fn *txnWriteFn) Setup(ctx context.Context) error {
	fn.open = map[int64]*openTxn{}
	fn.cps = checkpoints(ctx)
	var err error
	fn.ctl, err = kgo.NewClient(kgo.SeedBrokers(splitBrokers(fn.Brokers)...))
	return err
}

func (fn *txnWriteFn) Teardown() {
	for _, t := range fn.open {
		t.cl.Close()
	}
	if fn.ctl != nil {
		fn.ctl.Close()
	}
}

func (fn *txnWriteFn) StartBundle(context.Context, func(Record)) {
	fn.bundle.start(fn.timeout())
}

func (fn *txnWriteFn) ProcessElement(ctx context.Context, sp state.Provider, tp timers.Provider, shard int64, r Record, _ func(Record)) error {
	t, ok := fn.open[shard]
	if !ok {
		var err error
		if t, err = fn.begin(ctx, sp, tp, shard); err != nil {
			return err
		}
		fn.open[shard] = t
	}
	fn.bundle.produce(t.cl, r, fn.Topic)
	return nil
}

// OnTimer settles the shard's transactions after a restore.
func (fn *txnWriteFn) OnTimer(ctx context.Context, sp state.Provider, _ timers.Provider, shard int64, _ timers.Context, _ func(Record)) error {
	st, _, err := fn.State.Read(sp)
	if err != nil {
		return err
	}
	if st, err = fn.settle(ctx, shard, st); err != nil {
		return err
	}
	return fn.State.Write(sp, st)
}

// begin opens the shard's transaction of the bundle on a free slot, once
// the shard's entries are settled, and records it in the shard's state.
func (fn *txnWriteFn) begin(ctx context.Context, sp state.Provider, tp timers.Provider, shard int64) (*openTxn, error) {
	st, _, err := fn.State.Read(sp)
	if err != nil {
		return nil, err
	}
	if st, err = fn.settle(ctx, shard, st); err != nil {
		return nil, err
	}
	slot := int32(0)
	for slices.ContainsFunc(st.Pending, func(e txnEntry) bool { return e.Slot == slot }) {
		slot++
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(splitBrokers(fn.Brokers)...),
		kgo.TransactionalID(fn.txnID(shard, slot)), kgo.TransactionTimeout(txnTimeout),
		kgo.DefaultProduceTopic(fn.Topic), kgo.ProducerLinger(5*time.Millisecond), kgo.UnknownTopicRetries(2))
	if err != nil {
		return nil, err
	}
	// A new producer of the id fences its earlier one and aborts what that
	// left open.
	pctx, cancel := context.WithTimeout(ctx, fn.timeout())
	defer cancel()
	producer, epoch, err := cl.ProducerID(pctx)
	if err == nil {
		err = cl.BeginTransaction()
	}
	if err != nil {
		cl.Close()
		return nil, fmt.Errorf("kafkaio: starting a transaction as %s on %s: %w", fn.txnID(shard, slot), fn.Brokers, err)
	}
	st.Slots = max(st.Slots, slot+1)
	if fn.cps != nil {
		st.Pending = append(st.Pending, txnEntry{Slot: slot, Producer: producer, Epoch: int32(epoch), Written: time.Now().UnixMilli()})
		fn.Settle.Set(tp, time.Now().Add(5*time.Second))
	}
	return &openTxn{cl: cl, slot: slot, producer: producer, epoch: epoch}, fn.State.Write(sp, st)
}

// settle drops from the shard's entries those this process committed and,
// once after each restore of the job, commits those written before it
// (the restored checkpoint holds them: their bundles were before it) and
// aborts whatever else the shard's ids left open (written after that
// checkpoint, whose input is read again).
func (fn *txnWriteFn) settle(ctx context.Context, shard int64, st txnState) (txnState, error) {
	txnMu.Lock()
	st.Pending = slices.DeleteFunc(st.Pending, func(e txnEntry) bool {
		k := committedKey(fn.txnID(shard, e.Slot), e.Producer, e.Epoch)
		done := txnCommitted[k]
		delete(txnCommitted, k)
		return done
	})
	settled := txnSettled[fn.txnID(shard, -1)]
	txnMu.Unlock()
	if fn.cps == nil {
		return st, nil
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	restored, err := fn.cps.lastRestore(rctx)
	if err != nil || !restored.After(settled) {
		return st, err
	}
	var kept []txnEntry
	for _, e := range st.Pending {
		if !time.UnixMilli(e.Written).Before(restored) {
			kept = append(kept, e)
			continue
		}
		if err := fn.endTxn(ctx, fn.txnID(shard, e.Slot), e.Producer, int16(e.Epoch)); err != nil {
			return st, err
		}
	}
	st.Pending = kept
	for slot := range st.Slots {
		if slices.ContainsFunc(kept, func(e txnEntry) bool { return e.Slot == slot }) {
			continue
		}
		if err := fn.fence(ctx, fn.txnID(shard, slot)); err != nil {
			return st, err
		}
	}
	txnMu.Lock()
	txnSettled[fn.txnID(shard, -1)] = restored
	txnMu.Unlock()
	return st, nil
}

// endTxn commits the transaction of id, producer and epoch. One already
// ended (committed by the writer that wrote it, once a checkpoint after it
// completed) is answered with an error of its state or epoch: it is done.
func (fn *txnWriteFn) endTxn(ctx context.Context, id string, producer int64, epoch int16) error {
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, producer, epoch, true
	return retry(ctx, func() error {
		resp, err := req.RequestWith(ctx, fn.ctl)
		if err != nil {
			return err
		}
		switch err := kerr.ErrorForCode(resp.ErrorCode); {
		case err == nil:
			return nil
		case errors.Is(err, kerr.InvalidTxnState), errors.Is(err, kerr.InvalidProducerEpoch),
			errors.Is(err, kerr.ProducerFenced), errors.Is(err, kerr.InvalidProducerIDMapping):
			fn.ended(ctx, id, producer, epoch, err)
			return nil
		default:
			return fmt.Errorf("kafkaio: committing the transaction %s on %s: %w", id, fn.Brokers, err)
		}
	})
}

// ended says what became of a transaction that was ended before the
// restored job could commit it: committed by the job that wrote it, or,
// when the job was restored past the transactions' timeout, aborted by
// Kafka, its records lost.
func (fn *txnWriteFn) ended(ctx context.Context, id string, producer int64, epoch int16, why error) {
	adm := kadm.NewClient(fn.ctl)
	d, err := adm.DescribeTransactions(ctx, id)
	if err == nil {
		if t, ok := d[id]; ok && t.ProducerID == producer && t.State == "CompleteAbort" {
			log.Errorf(ctx, "kafkaio: the transaction %s (producer %d, epoch %d) of the restored checkpoint was aborted by Kafka before the job restored it (restored more than %v after it was written?): its records are lost from topic %s", id, producer, epoch, txnTimeout, fn.Topic)
			return
		}
	}
	log.Infof(ctx, "kafkaio: the transaction %s (producer %d, epoch %d) of the restored checkpoint was committed before: %v", id, producer, epoch, why)
}

// fence aborts what id left open, by starting a new producer of it.
func (fn *txnWriteFn) fence(ctx context.Context, id string) error {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID, req.TransactionTimeoutMillis, req.ProducerID, req.ProducerEpoch = &id, int32(txnTimeout.Milliseconds()), -1, -1
	return retry(ctx, func() error {
		resp, err := req.RequestWith(ctx, fn.ctl)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if err != nil {
			return fmt.Errorf("kafkaio: aborting what the transactional id %s left open on %s: %w", id, fn.Brokers, err)
		}
		return nil
	})
}

func (fn *txnWriteFn) FinishBundle(ctx context.Context, emit func(Record)) error {
	defer clear(fn.open)
	if err := fn.bundle.wait(ctx, fn.Topic, fn.Brokers, func() {}); err != nil {
		for _, t := range fn.open {
			actx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			t.cl.EndTransaction(actx, kgo.TryAbort)
			cancel()
			t.cl.Close()
		}
		return err
	}
	end := time.Now()
	var failed error
	for shard, t := range fn.open {
		if fn.cps == nil {
			// Once a shard's commit failed the bundle fails and is retried:
			// the shards not yet committed abort, so that the retry does not
			// write their records a second time.
			how := kgo.TryCommit
			if failed != nil {
				how = kgo.TryAbort
			}
			err := t.cl.EndTransaction(ctx, how)
			t.cl.Close()
			if err != nil && failed == nil {
				failed = fmt.Errorf("kafkaio: committing the transaction %s on %s: %w; %s", fn.txnID(shard, t.slot), fn.Brokers, err, notWritten(fn.bundle.pending, nil))
			}
			continue
		}
		// The records are in Kafka's log, in the open transaction; closing
		// the client leaves it open for the commit below.
		t.cl.Close()
		id, t := fn.txnID(shard, t.slot), t
		fn.cps.after(end, func() {
			if err := fn.endTxn(context.Background(), id, t.producer, t.epoch); err != nil {
				log.Errorf(context.Background(), "%v (a job restored from the checkpoint that holds it commits it)", err)
				return
			}
			txnMu.Lock()
			txnCommitted[committedKey(id, t.producer, int32(t.epoch))] = true
			txnMu.Unlock()
		})
	}
	if failed != nil {
		return failed // every client closed; none of the bundle's records marked safe
	}
	fn.bundle.emit(ctx, emit)
	return nil
}

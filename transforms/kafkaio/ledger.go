package kafkaio

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/timers"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/twmb/franz-go/pkg/kadm"
)

func init() {
	beam.RegisterType(reflect.TypeFor[ledgerState]())
}

// ledger is a partition's safe offsets: all below base, and the sorted,
// disjoint spans above.
type ledger struct {
	base  int64
	spans []span
}

type span struct{ from, to int64 } // [from, to)

// markSafe adds [from, to) and moves base over the spans it now reaches.
func (l *ledger) markSafe(from, to int64) {
	from = max(from, l.base)
	if from >= to {
		return
	}
	i, _ := slices.BinarySearchFunc(l.spans, from, func(s span, x int64) int {
		switch {
		case s.to < x:
			return -1
		case s.from > x:
			return 1
		}
		return 0
	})
	j := i
	for j < len(l.spans) && l.spans[j].from <= to {
		from, to = min(from, l.spans[j].from), max(to, l.spans[j].to)
		j++
	}
	l.spans = slices.Replace(l.spans, i, j, span{from, to})
	for len(l.spans) > 0 && l.spans[0].from <= l.base {
		l.base = max(l.base, l.spans[0].to)
		l.spans = l.spans[1:]
	}
}

// ledgerState is a partition's ledger as its committer keeps it in the
// job's state.
type ledgerState struct {
	Base      int64
	From, To  []int64 // the spans above Base
	Committed int64   // the offset last committed for the group; -1: none
}

func (st ledgerState) ledger() *ledger {
	l := &ledger{base: st.Base}
	for i := range st.From {
		l.spans = append(l.spans, span{st.From[i], st.To[i]})
	}
	return l
}

func (l *ledger) state(committed int64) ledgerState {
	st := ledgerState{Base: l.base, Committed: committed}
	for _, sp := range l.spans {
		st.From, st.To = append(st.From, sp.from), append(st.To, sp.to)
	}
	return st
}

// ledgerFn is the committer of a group's partitions, keyed by partition:
// it keeps each one's ledger and commits, for the group, the offset below
// which every record is safe, as soon as it moves.
type ledgerFn struct {
	Brokers, Group string
	State          state.Value[ledgerState]
	End            timers.EventTime

	adm *kadm.Client
}

func (fn *ledgerFn) Setup() error {
	var err error
	fn.adm, err = adminFor(fn.Brokers)
	return err
}

func (fn *ledgerFn) ProcessElement(ctx context.Context, sp state.Provider, tp timers.Provider, key string, m marks) error {
	st, err := fn.load(ctx, sp, m.Topic, m.Partition)
	if err != nil {
		return err
	}
	l := st.ledger()
	for i := range m.From {
		l.markSafe(m.From[i], m.To[i])
	}
	fn.End.Set(tp, mtime.EndOfGlobalWindowTime.ToTime())
	return fn.commit(ctx, sp, m.Topic, m.Partition, l, st.Committed)
}

// OnTimer runs at the end of the input (the readers ended): when no span
// is pending, it commits past what the readers passed over after their
// last record (markers, aborted records), so that a job that ends by
// itself leaves each partition committed to its end.
func (fn *ledgerFn) OnTimer(ctx context.Context, sp state.Provider, _ timers.Provider, key string, _ timers.Context) error {
	topic, partition, err := parseLedgerKey(key)
	if err != nil {
		return err
	}
	st, err := fn.load(ctx, sp, topic, partition)
	if err != nil {
		return err
	}
	l := st.ledger()
	if len(l.spans) == 0 {
		to, err := passedOverFrom(ctx, fn.Brokers, topic, partition, l.base)
		if err != nil {
			log.Warnf(ctx, "kafkaio: looking past offset %d of topic %s partition %d at the end of the input: %v (the group's offset stays there)", l.base, topic, partition, err)
		} else {
			l.markSafe(l.base, to)
		}
	}
	return fn.commit(ctx, sp, topic, partition, l, st.Committed)
}

// load reads the partition's ledger; a partition not marked yet starts at
// the group's committed offset, else at the partition's first.
func (fn *ledgerFn) load(ctx context.Context, sp state.Provider, topic string, partition int32) (ledgerState, error) {
	st, ok, err := fn.State.Read(sp)
	if err != nil || ok {
		return st, err
	}
	committed, err := groupOffset(ctx, fn.adm, fn.Group, topic, partition)
	if err != nil {
		return st, err
	}
	st = ledgerState{Base: committed, Committed: committed}
	if committed < 0 {
		first, err := fn.adm.ListStartOffsets(ctx, topic)
		if err == nil {
			err = first.Error()
		}
		if err != nil {
			return st, fmt.Errorf("kafkaio: listing the first offsets of topic %s on %s: %w", topic, fn.Brokers, err)
		}
		o, _ := first.Lookup(topic, partition)
		st.Base = o.Offset
	}
	return st, nil
}

// commit commits the ledger's base for the group when it passed what was
// committed, and saves the ledger. A failed commit is warned and retried
// with the next marks.
func (fn *ledgerFn) commit(ctx context.Context, sp state.Provider, topic string, partition int32, l *ledger, committed int64) error {
	if l.base > committed {
		os := kadm.Offsets{}
		os.Add(kadm.Offset{Topic: topic, Partition: partition, At: l.base, LeaderEpoch: -1})
		err := retry(ctx, func() error {
			resp, err := fn.adm.CommitOffsets(ctx, fn.Group, os)
			if err == nil {
				err = resp.Error()
			}
			return err
		})
		if err != nil {
			log.Warnf(ctx, "kafkaio: committing offset %d of topic %s partition %d for group %s on %s: %v (retried with the next marks; a restart reads from offset %d)",
				l.base, topic, partition, fn.Group, fn.Brokers, err, max(committed, 0))
		} else {
			committed = l.base
		}
	}
	return fn.State.Write(sp, l.state(committed))
}

// fetchOffsets reads group's committed offsets, retried.
func fetchOffsets(ctx context.Context, adm *kadm.Client, group string) (kadm.OffsetResponses, error) {
	var resp kadm.OffsetResponses
	err := retry(ctx, func() error {
		var err error
		resp, err = adm.FetchOffsets(ctx, group)
		if err == nil {
			err = resp.Error()
		}
		return err
	})
	return resp, err
}

// groupOffset is the group's committed offset of a partition, -1 for none.
func groupOffset(ctx context.Context, adm *kadm.Client, group, topic string, partition int32) (int64, error) {
	resp, err := fetchOffsets(ctx, adm, group)
	if err != nil {
		return 0, fmt.Errorf("kafkaio: fetching the committed offsets of group %s: %w", group, err)
	}
	if o, ok := resp.Lookup(topic, partition); ok && o.At >= 0 {
		return o.At, nil
	}
	return -1, nil
}

// passedOverFrom reads the partition from offset from as a reader does and
// returns the offset of its first record, or its end when only markers
// follow.
func passedOverFrom(ctx context.Context, brokers, topic string, partition int32, from int64) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	adm, err := adminFor(brokers)
	if err != nil {
		return from, err
	}
	ends, err := adm.ListCommittedOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return from, err
	}
	end, _ := ends.Lookup(topic, partition)
	if end.Offset <= from {
		return from, nil
	}
	cl, err := newConsumer(brokers, topic, partition, from, 200*time.Millisecond)
	if err != nil {
		return from, err
	}
	defer cl.Close()
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return from, err
		}
		if err := fetchError(fs); err != nil {
			return from, err
		}
		for _, r := range fs.Records() {
			if !r.Attrs.IsControl() {
				return r.Offset, nil
			}
			if r.Offset+1 >= end.Offset {
				return end.Offset, nil
			}
		}
	}
}

func parseLedgerKey(key string) (string, int32, error) {
	i := strings.LastIndexByte(key, '/')
	if i < 0 {
		return "", 0, errors.New("kafkaio: a ledger key without a partition: " + key)
	}
	p, err := strconv.ParseInt(key[i+1:], 10, 32)
	if err != nil {
		return "", 0, fmt.Errorf("kafkaio: the ledger key %q: %w", key, err)
	}
	return key[:i], int32(p), nil
}

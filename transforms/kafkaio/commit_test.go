package kafkaio

import (
	"context"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/beamdedup/beamdedup/testing/kafkatest"
)

func offsetsOf(topic string, at map[int32]int64) kadm.Offsets {
	os := kadm.Offsets{}
	for p, o := range at {
		os.Add(kadm.Offset{Topic: topic, Partition: p, At: o, LeaderEpoch: -1})
	}
	return os
}

// waitCommitted waits until the group's committed offsets of topic are
// want, failing after a minute.
func waitCommitted(t *testing.T, b *kafkatest.Broker, group, topic string, want map[int32]int64) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		got, err := b.Committed(ctx, group, topic)
		cancel()
		if err == nil && assert.ObjectsAreEqual(want, got) {
			return
		}
		if time.Now().After(deadline) {
			require.Equal(t, want, got, "committed offsets of %s (err %v)", group, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Only what reached Commit is committed, and in each partition only up to
// the first record that did not: there every later record waits.
func TestCommitCommitsAPartitionOnlyUpToItsFirstRecordThatIsNotSafe(t *testing.T) {
	b := kafkatest.Shared(t)
	topic := b.NewTopic(t, 2)
	written := produce(t, b, topic, 0, 100, base)
	end := map[int32]int64{}
	for _, w := range written {
		end[w.Partition] = max(end[w.Partition], w.Offset+1)
	}
	require.Len(t, end, 2)
	const group = "commit-holes"

	name := t.Name()
	c := newCollection(name)
	c.drop = map[int32]int64{0: 7} // partition 0 from offset 7 never reaches Commit
	p, s := beam.NewPipelineWithRoot()
	recs := Read(s, b.Addr, topic, Group(group), IdleStop(quiet))
	Commit(s, b.Addr, group, beam.ParDo(s, &collectFn{Name: name}, recs))
	pr, err := runPipeline(t, p, 2*time.Minute)
	require.NoError(t, err)

	waitCommitted(t, b, group, topic, map[int32]int64{0: 7, 1: end[1]})
	cs := readCounters(pr)
	assert.Equal(t, int64(100), cs.Read)
	assert.Equal(t, 100-(end[0]-7), cs.Safe)
	assert.Len(t, c.records(), 100)
}

// A second run of the same group starts where the first committed: it
// reads the records the first did not make safe, and the ones written
// since, and no other.
func TestASecondRunReadsWhatTheFirstDidNotMakeSafe(t *testing.T) {
	b := kafkatest.Shared(t)
	topic := b.NewTopic(t, 2)
	first := produce(t, b, topic, 0, 60, base)
	const group = "second-run"
	runOnce := func(name string, drop map[int32]int64) []Record {
		c := newCollection(name)
		c.drop = drop
		p, s := beam.NewPipelineWithRoot()
		recs := Read(s, b.Addr, topic, Group(group), IdleStop(quiet))
		Commit(s, b.Addr, group, beam.ParDo(s, &collectFn{Name: name}, recs))
		_, err := runPipeline(t, p, 2*time.Minute)
		require.NoError(t, err)
		return c.records()
	}
	runOnce(t.Name()+"/1", map[int32]int64{0: 5, 1: 9})
	second := produce(t, b, topic, 60, 10, base)
	got := map[string]bool{}
	for _, r := range runOnce(t.Name()+"/2", nil) {
		got[string(r.Key)] = true
	}
	for _, w := range append(first, second...) {
		want := (w.Partition == 0 && w.Offset >= 5) || (w.Partition == 1 && w.Offset >= 9)
		assert.Equal(t, want, got[string(w.Key)], "partition %d offset %d", w.Partition, w.Offset)
	}
}

// endOffsets are the offsets after the last of written, by partition.
func endOffsets(written []*kgo.Record) map[int32]int64 {
	end := map[int32]int64{}
	for _, w := range written {
		end[w.Partition] = max(end[w.Partition], w.Offset+1)
	}
	return end
}

// committedNow are the group's committed offsets of topic, read once.
func committedNow(t *testing.T, b *kafkatest.Broker, group, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := b.Committed(ctx, group, topic)
	require.NoError(t, err)
	return got
}

// A job that ends by itself (IdleStop) has committed, by the time it
// ends, every offset it read to the end of each partition: nothing waits
// for a Control's Close.
func TestAnIdleStopEndCommitsEveryPartitionToItsEndBeforeTheJobEnds(t *testing.T) {
	b := kafkatest.Shared(t)
	topic := b.NewTopic(t, 2)
	written := produce(t, b, topic, 0, 60, base)
	const group = "idle-end"
	p, s := beam.NewPipelineWithRoot()
	recs := Read(s, b.Addr, topic, Group(group), IdleStop(quiet))
	newCollection(t.Name())
	Commit(s, b.Addr, group, beam.ParDo(s, &collectFn{Name: t.Name()}, recs))
	_, err := runPipeline(t, p, 2*time.Minute)
	require.NoError(t, err)
	assert.Equal(t, endOffsets(written), committedNow(t, b, group, topic), "committed at the end of each partition when the job ended")
}

// A stop request ends every reader; what they read is committed once
// safe, before the job ends, with no Close.
func TestAStopRequestEndsEveryReaderAndWhatTheyReadIsCommittedBeforeTheJobEnds(t *testing.T) {
	b := kafkatest.Shared(t)
	topic := b.NewTopic(t, 2)
	written := produce(t, b, topic, 0, 40, base)
	const group = "stopper"
	name := t.Name()
	c := newCollection(name)
	st, controlled := newControl(t)
	p, s := beam.NewPipelineWithRoot()
	recs := Read(s, b.Addr, topic, Group(group), controlled)
	Commit(s, b.Addr, group, beam.ParDo(s, &collectFn{Name: name}, recs))
	go func() {
		for len(c.records()) < 40 {
			time.Sleep(20 * time.Millisecond)
		}
		st.Stop()
	}()
	_, err := runPipeline(t, p, 2*time.Minute)
	require.NoError(t, err)
	assert.Equal(t, 2, st.Progress().Ended, "both partitions' readers ended")
	assert.Equal(t, int64(40), st.Progress().Claimed)
	assert.Equal(t, endOffsets(written), committedNow(t, b, group, topic))
}

func TestTryCommitRejectsBadArgumentsNamingEach(t *testing.T) {
	_, s := beam.NewPipelineWithRoot()
	err := TryCommit(s, "h", "", beam.Create(s, "x"), beam.Create(s, Record{}))
	require.Error(t, err)
	for _, w := range []string{"kafkaio.Commit:", `broker "h" is not host:port`, "no group",
		"needs PCollection<kafkaio.Record> or PCollection<KV<K, kafkaio.Record>>: collection 1 is string"} {
		assert.Contains(t, err.Error(), w)
	}
	assert.NotContains(t, err.Error(), "collection 2", "a PCollection<Record> is right")
	assert.ErrorContains(t, TryCommit(s, "h:1", "g"), "no collection")
}

func init() {
	register.Function4x0(fateOf)
	register.Emitter2[string, Record]()
}

// fateOf sends a record to be written (offset%3 == 0), dead-lettered
// (== 1) or dropped as a duplicate (== 2), as a dedup pipeline does.
func fateOf(r Record, written func(Record), dead func(Record), dropped func(string, Record)) {
	switch r.Offset % 3 {
	case 0:
		written(r)
	case 1:
		dead(r.DeadLetter("not json"))
	default:
		dropped(string(r.Key), r)
	}
}

// One Commit takes every way a record becomes safe: written, written as a
// dead letter (with its reason headers), dropped as a duplicate (a KV, as
// KeepFirst's Dropped). The counters account for every record, and each
// partition is committed to its end when the job ends.
func TestCommitTakesWrittenDeadLetteredAndDroppedRecordsInOneCall(t *testing.T) {
	b := kafkatest.Shared(t)
	in, out, dlq := b.NewTopic(t, 2), b.NewTopic(t, 2), b.NewTopic(t, 2)
	written := produce(t, b, in, 0, 90, base)
	const group = "one-commit"
	p, s := beam.NewPipelineWithRoot()
	recs := Read(s, b.Addr, in, Group(group), IdleStop(quiet))
	toWrite, dead, dropped := beam.ParDo3(s, fateOf, recs)
	Commit(s, b.Addr, group, Write(s, b.Addr, out, toWrite), dropped, Write(s, b.Addr, dlq, dead))
	pr, err := runPipeline(t, p, 2*time.Minute)
	require.NoError(t, err)

	cs := readCounters(pr)
	assert.Equal(t, int64(90), cs.Read)
	assert.Equal(t, cs.Read, cs.Written+cs.DeadLettered+cs.Dropped, "every record read is written, dead-lettered or dropped: %+v", cs)
	assert.Positive(t, cs.Written)
	assert.Positive(t, cs.DeadLettered)
	assert.Positive(t, cs.Dropped)
	assert.Equal(t, cs.Read, cs.Safe)
	assert.Equal(t, endOffsets(written), committedNow(t, b, group, in))
	deadRecs := consumeAll(t, b, dlq)
	require.Len(t, deadRecs, int(cs.DeadLettered))
	h := map[string]string{}
	for _, kh := range deadRecs[0].Headers {
		h[kh.Key] = string(kh.Value)
	}
	assert.Equal(t, "not json", h["dlq_reason"])
	assert.Equal(t, in, h["dlq_topic"])
	assert.Contains(t, []string{"0", "1"}, h["dlq_partition"])
	assert.NotEmpty(t, h["dlq_offset"])
	_, ok := h["i"]
	assert.True(t, ok, "the record's own headers kept")
}

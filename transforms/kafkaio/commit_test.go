package kafkaio

import (
	"context"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
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
	recs := Read(s, b.Addr, topic, Group(group), IdleStop(quiet), CommitInterval(100*time.Millisecond))
	Commit(s, group, beam.ParDo(s, &collectFn{Name: name}, recs))
	pr, err := runPipeline(t, p, 2*time.Minute)
	require.NoError(t, err)

	waitCommitted(t, b, group, topic, map[int32]int64{0: 7, 1: end[1]})
	cs := readCounters(pr)
	assert.Equal(t, int64(100), cs.Read)
	assert.Equal(t, 100-(end[0]-7), cs.Safe)
	assert.Zero(t, cs.Unheld, "every record marked in its reader's process")
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
		Commit(s, group, beam.ParDo(s, &collectFn{Name: name}, recs))
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
// for a commit interval (an hour here) or a Control's Close.
func TestAnIdleStopEndCommitsEveryPartitionToItsEndBeforeTheJobEnds(t *testing.T) {
	b := kafkatest.Shared(t)
	topic := b.NewTopic(t, 2)
	written := produce(t, b, topic, 0, 60, base)
	const group = "idle-end"
	p, s := beam.NewPipelineWithRoot()
	recs := Read(s, b.Addr, topic, Group(group), IdleStop(quiet), CommitInterval(time.Hour))
	newCollection(t.Name())
	Commit(s, group, beam.ParDo(s, &collectFn{Name: t.Name()}, recs))
	_, err := runPipeline(t, p, 2*time.Minute)
	require.NoError(t, err)
	assert.Equal(t, endOffsets(written), committedNow(t, b, group, topic), "committed at the end of each partition when the job ended")
}

// A stop request ends every reader; what they read is committed once
// safe, before the job ends, with no Close and an hour's commit interval.
func TestAStopRequestEndsEveryReaderAndWhatTheyReadIsCommittedBeforeTheJobEnds(t *testing.T) {
	b := kafkatest.Shared(t)
	topic := b.NewTopic(t, 2)
	written := produce(t, b, topic, 0, 40, base)
	const group = "stopper"
	name := t.Name()
	c := newCollection(name)
	st, controlled := newControl(t)
	p, s := beam.NewPipelineWithRoot()
	recs := Read(s, b.Addr, topic, Group(group), controlled, CommitInterval(time.Hour))
	Commit(s, group, beam.ParDo(s, &collectFn{Name: name}, recs))
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
	err := TryCommit(s, "", beam.Create(s, "x"), IdleStop(quiet))
	require.Error(t, err)
	for _, w := range []string{"kafkaio.Commit:", "no group", "needs a PCollection<kafkaio.Record>, got string", "IdleStop does not apply to kafkaio.Commit"} {
		assert.Contains(t, err.Error(), w)
	}
}

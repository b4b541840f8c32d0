package main

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/testing/kafkatest"
)

// Fault tests of the Kafka pipeline, as a user meets them: the broker
// (testing/kafkatest) and runjob (go build) are separate processes;
// runjob is killed with SIGKILL, the broker stopped and started again,
// the output topic deleted, a partition added; every step has a deadline,
// and every output record is counted per order. The promise: an offset is
// committed only once every record before it is safe, so no order is
// ever lost; a restart writes again at most the orders of the records it
// reads again. docs/kafka.md has the table of what they measured.

// kafkaCrashOrders is the backlog of the kill test: with the seed's
// duplicates, about 35,400 records. Prism in process reads and writes a
// backlog of 14,000 in about two bundles, too fast to be killed with it in
// flight.
const kafkaCrashOrders = 30000

// waitRunning waits, as waitFor does, until cond holds, failing at once
// when p exits first.
func waitRunning(t *testing.T, p *runjobProcess, d time.Duration, what string, cond func() bool) {
	t.Helper()
	waitFor(t, d, what, func() bool {
		select {
		case <-p.exited:
			require.FailNow(t, "runjob exited while waiting for "+what, p.stderr.String())
		default:
		}
		return cond()
	})
}

// finishKafka lets a restarted runjob (with --idle_stop) read to the end
// and exit by itself; it checks the run's summary and returns the records
// it read.
func finishKafka(t *testing.T, p *runjobProcess) (read int) {
	t.Helper()
	code := p.wait(t, 3*time.Minute)
	require.Equal(t, 0, code, "the rerun reads to the end and exits 0\nstdout:\n%s\nstderr:\n%s", p.stdout.String(), p.stderr.String())
	require.Contains(t, p.stdout.String(), "(idle, every partition read to its end)")
	read, safe := kafkaSummary(t, p.stdout.String())
	assert.Equal(t, read, safe, "every record the rerun read is safe")
	return read
}

// verdictKafka asserts that every order of ids is on the output topic
// (read whole, plus what before counted of an earlier topic of that name)
// and that no more were written twice than the records read again after
// the fault; it returns the doubles.
func verdictKafka(t *testing.T, b *kafkatest.Broker, topic string, ids []string, rereadAfterFault int, before ...*kafkatest.Counter) (doubled int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	recs, err := b.ReadAll(ctx, topic)
	require.NoError(t, err)
	per := map[string]int{}
	for _, r := range recs {
		per[string(r.Key)]++
	}
	for _, o := range before {
		for k, c := range o.PerKey() {
			per[k] += c
		}
	}
	lost := 0
	for _, id := range ids {
		switch c := per[id]; {
		case c == 0:
			lost++
		case c > 1:
			doubled++
		}
	}
	assert.Zero(t, lost, "orders never written: %d of %d", lost, len(ids))
	assert.LessOrEqual(t, doubled, rereadAfterFault, "an order written twice was read again after the fault")
	return doubled
}

// rerunAndCheck runs runjob again with --idle_stop after a fault, waits
// for it to read to the end, checks every order is out (verdictKafka) and
// returns what it read again and the orders written twice.
func rerunAndCheck(t *testing.T, b *kafkatest.Broker, n kafkaNames, args []string, ids []string, before ...*kafkatest.Counter) (reread, doubled int) {
	t.Helper()
	second := startRunjob(t, append(args, "--idle_stop=3s")...)
	reread = finishKafka(t, second)
	return reread, verdictKafka(t, b, n.out, ids, reread, before...)
}

func TestCrashKafka_KillWithABacklogInFlightLosesNoOrder(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts runjob on a 35,000-record backlog (CI runs it)")
	}
	b := kafkatest.Shared(t)
	n := newKafkaNames(t, b)
	ids := n.produceOrders(t, 0, kafkaCrashOrders)
	out := b.Count(t, n.out)
	args := append(n.flags(), "--progress=250ms")

	first, at := startWithABacklogInFlight(t, args...)
	require.NoError(t, first.cmd.Process.Signal(syscall.SIGKILL))
	first.wait(t, 30*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	committed, err := b.Committed(ctx, n.group, n.in)
	require.NoError(t, err)
	end, err := b.EndOffsets(ctx, n.in)
	require.NoError(t, err)
	uncommitted := 0
	for p, o := range end {
		uncommitted += int(o - committed[p])
	}
	t.Logf("killed at %+v; committed then: %v of %v; %d distinct orders out", at, committed, end, out.Distinct())

	// What bounds the doubles: the restart reads exactly what the group
	// had not committed, and writes again only orders among those.
	reread, doubled := rerunAndCheck(t, b, n, args, ids)
	assert.Equal(t, uncommitted, reread, "the restart reads from the group's committed offsets")
	t.Logf("the restart read %d records again; %d of %d orders written twice", reread, doubled, len(ids))
}

func TestCrashKafka_BrokerStoppedAndRestartedMidRunLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("stops and restarts the broker under a running runjob (CI runs it)")
	}
	b := kafkatest.Shared(t)
	n := newKafkaNames(t, b)
	ids := n.produceOrders(t, 0, 3000)
	out := b.Count(t, n.out)
	args := append(n.flags(), "--progress=500ms")

	first := startRunjob(t, args...)
	waitRunning(t, first, 2*time.Minute, "output before the broker stops", func() bool { return out.Distinct() >= 300 })
	b.Stop()
	stoppedAt := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, b.Restart(ctx))
	t.Logf("broker down for %v", time.Since(stoppedAt).Round(time.Millisecond))
	more := n.produceOrders(t, 3000, 4000) // written after the restart
	ids = append(ids, more...)

	// The job waits for the broker and goes on, or fails naming Kafka; in
	// both cases nothing is lost.
	done := func() bool {
		select {
		case <-first.exited:
			return true
		default:
			return out.Distinct() >= len(ids)
		}
	}
	waitFor(t, 3*time.Minute, "the run to go on to the end, or fail", done)
	select {
	case <-first.exited:
		stderr := first.stderr.String()
		line := stderr[strings.LastIndex(strings.TrimSpace(stderr), "\n")+1:]
		t.Logf("runjob exited %d: %s", first.cmd.ProcessState.ExitCode(), line)
		assert.Equal(t, 1, first.cmd.ProcessState.ExitCode())
		assert.Contains(t, line, b.Addr, "the failure names the brokers")
		reread, doubled := rerunAndCheck(t, b, n, args, ids)
		t.Logf("the rerun read %d records again; %d orders written twice", reread, doubled)
	default:
		t.Logf("the run waited for the broker and went on")
		first.interrupt(t)
		require.Equal(t, 0, first.wait(t, 2*time.Minute), first.stderr.String())
		assert.Contains(t, first.stdout.String(), "(stopped, drained)")
		read, _ := kafkaSummary(t, first.stdout.String())
		verdictKafka(t, b, n.out, ids, read)
	}
}

func TestCrashKafka_OutputTopicDeletedMidRunFailsTheJobAndARerunLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("deletes the output topic under a running runjob (CI runs it)")
	}
	b := kafkatest.Shared(t)
	n := newKafkaNames(t, b)
	var ids []string
	ids = append(ids, n.produceOrders(t, 0, 1000)...)
	out := b.Count(t, n.out)
	args := append(n.flags(), "--progress=500ms")

	first := startRunjob(t, args...)
	waitRunning(t, first, 2*time.Minute, "output from the first run", func() bool { return out.Distinct() >= 300 })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, b.DeleteTopic(ctx, n.out))
	ids = append(ids, n.produceOrders(t, 1000, 3000)...) // records whose write fails
	code := first.wait(t, 2*time.Minute)
	stderr := first.stderr.String()
	line := stderr[strings.LastIndex(strings.TrimSpace(stderr), "\n")+1:]
	t.Logf("runjob exited %d: %s", code, line)
	assert.Equal(t, 1, code)
	assert.Contains(t, line, "kafkaio: write of")
	assert.Contains(t, line, "to topic "+n.out+" on "+b.Addr+" failed")
	assert.Contains(t, line, "not written:")
	assert.Contains(t, line, "their offsets are not committed")

	// The topic back (a new one of the same name), a rerun.
	out.Stop()
	require.NoError(t, b.CreateTopic(ctx, n.out, 2))
	reread, doubled := rerunAndCheck(t, b, n, args, ids, out)
	t.Logf("the rerun read %d records again; %d orders written twice", reread, doubled)
}

// Partitions are listed when a run starts: one added while it runs is
// read by the next run, from its start (the group has no offset there),
// so its records are late but not lost.
func TestCrashKafka_APartitionAddedWhileRunningIsReadByTheNextRun(t *testing.T) {
	if testing.Short() {
		t.Skip("adds a partition under a running runjob (CI runs it)")
	}
	b := kafkatest.Shared(t)
	n := newKafkaNames(t, b)
	ids := n.produceOrders(t, 0, 500)
	out := b.Count(t, n.out)
	args := append(n.flags(), "--progress=500ms")

	first := startRunjob(t, args...)
	waitRunning(t, first, 2*time.Minute, "every order of the first batch out", func() bool { return out.Distinct() >= len(ids) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, b.AddPartitions(ctx, n.in, 1))
	ids = append(ids, n.produceOrders(t, 500, 1500)...)
	end, err := b.EndOffsets(ctx, n.in)
	require.NoError(t, err)
	require.Positive(t, end[2], "records on the new partition")
	waitRunning(t, first, 2*time.Minute, "the records of the old partitions out", func() bool {
		return out.Distinct() >= len(ids)-int(end[2])
	})
	first.interrupt(t)
	require.Equal(t, 0, first.wait(t, 2*time.Minute), first.stderr.String())
	committed, err := b.Committed(ctx, n.group, n.in)
	require.NoError(t, err)
	_, read2 := committed[2]
	assert.False(t, read2, "the first run did not read the new partition")

	reread, _ := rerunAndCheck(t, b, n, args, ids)
	committed, err = b.Committed(ctx, n.group, n.in)
	require.NoError(t, err)
	assert.Equal(t, end[2], committed[2], "the next run read the new partition to its end")
	t.Logf("the next run read %d records (%d on the new partition)", reread, end[2])
}

// With --watch_partitions the running job lists the partitions again and
// reads one added while it runs, to its end, before it is stopped.
func TestCrashKafka_APartitionAddedWhileRunningIsReadByTheSameRunWithWatchPartitions(t *testing.T) {
	if testing.Short() {
		t.Skip("adds a partition under a running runjob (CI runs it)")
	}
	b := kafkatest.Shared(t)
	n := newKafkaNames(t, b)
	ids := n.produceOrders(t, 0, 500)
	out := b.Count(t, n.out)
	first := startRunjob(t, append(n.flags(), "--progress=500ms", "--watch_partitions=500ms")...)
	waitRunning(t, first, 2*time.Minute, "every order of the first batch out", func() bool { return out.Distinct() >= len(ids) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, b.AddPartitions(ctx, n.in, 1))
	ids = append(ids, n.produceOrders(t, 500, 1500)...)
	end, err := b.EndOffsets(ctx, n.in)
	require.NoError(t, err)
	require.Positive(t, end[2], "records on the new partition")
	waitRunning(t, first, 2*time.Minute, "every order out, the new partition's too", func() bool { return out.Distinct() >= len(ids) })
	first.interrupt(t)
	require.Equal(t, 0, first.wait(t, 2*time.Minute), first.stderr.String())
	committed, err := b.Committed(ctx, n.group, n.in)
	require.NoError(t, err)
	assert.Equal(t, end, committed, "every partition committed to its end by the run, the new one too")
	verdictKafka(t, b, n.out, ids, 0)
}

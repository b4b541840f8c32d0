package kafkaio

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/beamdedup/beamdedup/testing/kafkatest"
)

func init() {
	register.Function1x2(keyOne)
	register.Function2x0(countWindow)
	register.Iter1[Record]()
}

func keyOne(r Record) (string, Record) { return "k", r }

// windowsFired counts the windows whose GroupByKey output came out, that
// is, whose end the watermark passed.
var windowsFired atomic.Int64

func countWindow(_ string, recs func(*Record) bool) {
	var r Record
	for recs(&r) {
	}
	windowsFired.Add(1)
}

// Records only on partition 0, none ever on partition 1: the window of
// partition 0's records closes while the job runs, so the empty partition
// does not hold the watermark back.
func TestAnIdlePartitionDoesNotHoldBackTheWatermark(t *testing.T) {
	b := kafkatest.Shared(t)
	topic := b.NewTopic(t, 2)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range 10 {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Value: []byte("x"),
			Timestamp: base.Add(time.Duration(i) * time.Second)}).FirstErr())
	}
	windowsFired.Store(0)
	st, controlled := newControl(t)
	p, s := beam.NewPipelineWithRoot()
	recs := beam.WindowInto(s, window.NewFixedWindows(time.Minute), Read(s, b.Addr, topic, controlled))
	beam.ParDo0(s, countWindow, beam.GroupByKey(s, beam.ParDo(s, keyOne, recs)))
	done := make(chan error, 1)
	go func() {
		_, err := runPipeline(t, p, 2*time.Minute)
		done <- err
	}()
	deadline := time.After(time.Minute)
	for windowsFired.Load() == 0 {
		select {
		case err := <-done:
			require.FailNow(t, "the job ended before the window fired", "%v", err)
		case <-deadline:
			st.Stop()
			require.FailNow(t, "the window did not fire within a minute while the job ran: a partition holds the watermark back")
		case <-time.After(50 * time.Millisecond):
		}
	}
	st.Stop()
	require.NoError(t, <-done)
	assert.Equal(t, int64(1), windowsFired.Load())
}

package streaming

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/pstest"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beamdedup/beamdedup/internal/jobrun"
	"github.com/beamdedup/beamdedup/pipelines/orders"
	"github.com/beamdedup/beamdedup/testing/prismtest"
	"github.com/beamdedup/beamdedup/testing/pubsubtest"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/pubsubio"
)

// Benchmarks of the pipeline on Prism against the in-process pstest fake.
// Each iteration runs a whole job; run them with -benchtime=1x:
//
//	go test ./pipelines/streaming -run='^$' -bench=. -benchtime=1x
//
// msgs/s counts from the first to the last message seen at the end of the
// measured part (the idle stop and job start-up are excluded).

func init() {
	register.DoFn1x0[beam.X](&seenFn{})
}

var seen sync.Map // name -> *seenStats

type seenStats struct {
	n           atomic.Int64
	first, last atomic.Int64 // unix nanos
}

func (s *seenStats) rate() float64 {
	d := time.Duration(s.last.Load() - s.first.Load())
	if d <= 0 {
		return 0
	}
	return float64(s.n.Load()) / d.Seconds()
}

// seenFn counts elements and remembers when the first and last came.
type seenFn struct{ Name string }

func (f *seenFn) ProcessElement(_ beam.X) {
	v, _ := seen.Load(f.Name)
	s := v.(*seenStats)
	now := time.Now().UnixNano()
	s.first.CompareAndSwap(0, now)
	s.last.Store(now)
	s.n.Add(1)
}

var benchN = flag.Int("bench_msgs", 5000, "messages per benchmark run")

// publishOrders publishes n orders (distinct order ids, created_at = now),
// spread evenly over d (all at once when d is 0).
func publishOrders(srv *pubsubtest.Server, topic string, n int, d time.Duration) {
	var gap time.Duration
	if d > 0 {
		gap = d / time.Duration(n)
	}
	start := time.Now()
	for i := range n {
		if gap > 0 {
			if wait := time.Until(start.Add(time.Duration(i) * gap)); wait > 0 {
				time.Sleep(wait)
			}
		}
		data, _ := json.Marshal(orders.Order{OrderID: fmt.Sprintf("o-%07d", i), Quantity: 1, Price: 10, CreatedAt: time.Now()})
		srv.PublishRaw(topic, data, nil)
	}
}

func benchSetup(b *testing.B) (*pubsubtest.Server, string) {
	srv := pubsubtest.New(b, 0)
	srv.MustTopic(b, "in")
	srv.MustTopic(b, "out")
	return srv, srv.MustSubscription(b, "in", "in-sub", 60*time.Second)
}

func runBench(b *testing.B, p *beam.Pipeline) beam.PipelineResult {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pr, err := jobrun.Run(ctx, p, prismtest.Job(b))
	if err != nil {
		b.Fatal(err)
	}
	return pr
}

var benchRead = []pubsubio.Option{pubsubio.IdleStop(2 * time.Second)}

// runCounted runs iteration i of a benchmark: on a fresh fake with *benchN
// orders published, a job that reads them, applies f to the messages (sub
// is the subscription read) and counts what f returns with seenFn. It
// returns the counts.
func runCounted(b *testing.B, i int, f func(s beam.Scope, sub string, msgs beam.PCollection) beam.PCollection) *seenStats {
	srv, sub := benchSetup(b)
	publishOrders(srv, "in", *benchN, 0)
	name := fmt.Sprintf("%s/%d", b.Name(), i)
	st := &seenStats{}
	seen.Store(name, st)
	p, s := beam.NewPipelineWithRoot()
	msgs := pubsubio.Read(s, sub, append(benchRead, pubsubio.Endpoint(srv.Addr))...)
	beam.ParDo0(s, &seenFn{Name: name}, f(s, sub, msgs))
	runBench(b, p)
	return st
}

func BenchmarkReadOnly(b *testing.B) {
	var rate float64
	for i := range b.N {
		st := runCounted(b, i, func(_ beam.Scope, _ string, msgs beam.PCollection) beam.PCollection { return msgs })
		if got := st.n.Load(); got < int64(*benchN) {
			b.Fatalf("saw %d of %d messages", got, *benchN)
		}
		rate += st.rate()
	}
	b.ReportMetric(rate/float64(b.N), "msgs/s")
}

func BenchmarkReadDedup(b *testing.B) {
	var rate float64
	for i := range b.N {
		st := runCounted(b, i, func(s beam.Scope, sub string, msgs beam.PCollection) beam.PCollection {
			rows, _ := beam.ParDo2(s, &decodeFn[orders.Order, pubsubio.Message]{Input: sub, Namespace: "beamdedup/bench", Columns: []string{"order_id"}}, msgs)
			res, err := dedup.TryKeepFirst(s, rows, dedup.UID("bench"))
			if err != nil {
				b.Fatal(err)
			}
			return beam.DropKey(s, res.Rows)
		})
		if got := st.n.Load(); got != int64(*benchN) {
			b.Fatalf("kept %d of %d orders", got, *benchN)
		}
		rate += st.rate()
	}
	b.ReportMetric(rate/float64(b.N), "msgs/s")
}

// BenchmarkReadDedupPublish runs the whole pipeline (Build) and measures
// throughput on a backlog, then latency from input publish to output publish
// at a steady 500 msgs/s for 5 s.
func BenchmarkReadDedupPublish(b *testing.B) {
	var rate float64
	var lat []time.Duration
	for range b.N {
		// Throughput on a backlog.
		srv, sub := benchSetup(b)
		publishOrders(srv, "in", *benchN, 0)
		p, s := beam.NewPipelineWithRoot()
		if _, err := Build(s, PubSub{Subscription: sub, OutputTopic: srv.TopicName("out"), Endpoint: srv.Addr, Read: benchRead},
			Config{Dedup: []dedup.Option{dedup.StateTTL(0)}}); err != nil {
			b.Fatal(err)
		}
		runBench(b, p)
		out := srv.MessagesOn("out")
		if len(out) != *benchN {
			b.Fatalf("published %d of %d orders", len(out), *benchN)
		}
		in := srv.MessagesOn("in")
		start := slices.MinFunc(in, func(a, c *pstest.Message) int { return a.PublishTime.Compare(c.PublishTime) }).PublishTime
		end := slices.MaxFunc(out, func(a, c *pstest.Message) int { return a.PublishTime.Compare(c.PublishTime) }).PublishTime
		rate += float64(len(out)) / end.Sub(start).Seconds()
		b.Logf("throughput part done: %d orders", len(out))

		// Latency at a steady rate.
		srv2, sub2 := benchSetup(b)
		p2, s2 := beam.NewPipelineWithRoot()
		if _, err := Build(s2, PubSub{Subscription: sub2, OutputTopic: srv2.TopicName("out"), Endpoint: srv2.Addr,
			Read: []pubsubio.Option{pubsubio.IdleStop(2 * time.Second), pubsubio.MaxBundleDuration(200 * time.Millisecond)}},
			Config{Dedup: []dedup.Option{dedup.StateTTL(0)}}); err != nil {
			b.Fatal(err)
		}
		go publishOrders(srv2, "in", 2500, 5*time.Second)
		runBench(b, p2)
		for _, m := range srv2.MessagesOn("out") {
			var o orders.Order
			if err := json.Unmarshal(m.Data, &o); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, m.PublishTime.Sub(o.CreatedAt))
		}
	}
	slices.Sort(lat)
	b.ReportMetric(rate/float64(b.N), "msgs/s")
	b.ReportMetric(float64(lat[len(lat)/2].Milliseconds()), "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Milliseconds()), "p99-ms")
}

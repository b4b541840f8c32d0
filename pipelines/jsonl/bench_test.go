package jsonl

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
)

// orderRow has the shape of the orders sample's row (pipelines/orders).
type orderRow struct {
	OrderID   string    `json:"order_id" beam:"order_id"`
	Quantity  int64     `json:"quantity" beam:"quantity"`
	Price     float64   `json:"price" beam:"price"`
	CreatedAt time.Time `json:"created_at" beam:"created_at"`
}

func init() { beam.RegisterType(reflect.TypeFor[orderRow]()) }

func orderLines(n int) []string {
	lines := make([]string, n)
	for i := range lines {
		lines[i] = fmt.Sprintf(`{"order_id":"3f782963-1da0-4787-a4b5-%012d","quantity":%d,"price":%d.%02d,"created_at":"2026-01-01T%02d:%02d:%02dZ"}`,
			i, 100+i%9900, 10+i%490, i%100, i/3600%24, i/60%60, i%60)
	}
	return lines
}

// BenchmarkParseFn_OrderLine is the read side's cost per line of an
// orders file: the checks, the JSON decoding, the counters.
func BenchmarkParseFn_OrderLine(b *testing.B) {
	fn := &parseFn{RowType: beam.EncodedType{T: reflect.TypeFor[orderRow]()}}
	fn.Setup()
	lines := orderLines(1024)
	ctx := context.Background()
	rows := 0
	emit := func(beam.Y) { rows++ }
	dead := func(ErrorLine) { b.Fatal("dead letter") }
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		fn.ProcessElement(ctx, "in.jsonl", lines[i%len(lines)], emit, dead)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(rows), "ns/row")
}

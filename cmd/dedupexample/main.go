// Command dedupexample is a user's own main, as docs/runners.md shows it:
// JSON Lines of orders in, the first row per order_id out, through
// dedup.KeepFirst, run with beamx.Run. It runs unchanged on Prism (the
// default) and on Flink (--runner=flink --endpoint=JOB_SERVER), with the
// Flink options of pipelines/jobrun/flinkopts as flags.
//
//	go run ./cmd/dedupexample --input=in.jsonl --output=out.jsonl
//	go run ./cmd/dedupexample --input=in.jsonl --output=out.jsonl \
//	    --runner=flink --endpoint=localhost:8099 --environment_type=LOOPBACK --parallelism=2
package main

import (
	"context"
	"encoding/json"
	"flag"
	"log"
	"path/filepath"
	"reflect"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/textio"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"

	"github.com/beamdedup/beamdedup/pipelines/jobrun/flinkopts"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// Order is a row: its columns are named by their beam tags.
type Order struct {
	OrderID  string  `beam:"order_id" json:"order_id"`
	Quantity int64   `beam:"quantity" json:"quantity"`
	Price    float64 `beam:"price" json:"price"`
}

func init() {
	beam.RegisterType(reflect.TypeOf(Order{}))
	register.Function2x0(parse)
	register.Function1x1(format)
	register.Emitter1[Order]()
}

func parse(line string, emit func(Order)) {
	var o Order
	if json.Unmarshal([]byte(line), &o) == nil && o.OrderID != "" {
		emit(o)
	}
}

func format(o Order) string {
	b, _ := json.Marshal(o)
	return string(b)
}

var (
	input  = flag.String("input", "", "JSON Lines of orders (required)")
	output = flag.String("output", "", "where the first row of each order goes (required)")
)

func main() {
	flinkopts.Register(flag.CommandLine) // --checkpointing_interval, --savepoint_path, ... reach Flink
	flag.Parse()
	beam.Init()
	if *input == "" || *output == "" {
		log.Fatal("dedupexample: --input and --output are required")
	}
	// Workers in another process (a worker pool, a TaskManager) resolve a
	// relative path in their own directory, and textio reads a glob that
	// matches nothing as no input at all.
	for _, p := range []*string{input, output} {
		abs, err := filepath.Abs(*p)
		if err != nil {
			log.Fatalf("dedupexample: %v", err)
		}
		*p = abs
	}
	p, s := beam.NewPipelineWithRoot()
	orders := beam.ParDo(s, parse, textio.Read(s, *input))
	kept := dedup.KeepFirst(s, orders, rowspec.PartitionBy("order_id"), dedup.StateTTL(2*time.Hour), dedup.UID("orders-dedup")).Rows
	textio.Write(s, *output, beam.ParDo(s, format, kept))
	if err := beamx.Run(context.Background(), p); err != nil {
		log.Fatalf("dedupexample: %v", err)
	}
}

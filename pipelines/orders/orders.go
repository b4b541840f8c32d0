// Package orders is the orders scenario of "Deduplicating Streams with Flink
// SQL": orders (order_id, quantity, price, created_at) where every order
// priced under 100 arrives twice, exactly duplicated. The pipeline reads
// JSON Lines, keeps the first row per order_id with dedup.KeepFirst and a
// StateTTL (2h by default, the article's assumption of how far apart
// duplicates arrive), and writes JSON Lines.
//
// On a bounded input such as a file, KeepFirst sets no processing-time
// timers, so the job ends when the file is read, whatever the TTL.
package orders

import (
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamdedup/beamdedup/pipelines/internal/pipeline"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// Order is one row of the orders table.
type Order struct {
	OrderID   string    `json:"order_id" beam:"order_id"`
	Quantity  int64     `json:"quantity" beam:"quantity"`
	Price     float64   `json:"price" beam:"price"`
	CreatedAt time.Time `json:"created_at" beam:"created_at"`
}

func init() { beam.RegisterType(reflect.TypeFor[Order]()) }

// Validate rejects rows without the columns the pipeline needs.
func (o *Order) Validate() error {
	switch {
	case o.OrderID == "":
		return errors.New("missing order_id")
	case o.CreatedAt.IsZero():
		return errors.New("missing created_at")
	}
	return nil
}

// UID is the default UID of the pipeline's KeepFirst.
const UID = "orders-dedup"

// DefaultStateTTL is the default retention: duplicates are assumed to
// arrive within 2 hours of the original.
const DefaultStateTTL = 2 * time.Hour

// Config configures Build.
type Config struct {
	// Input is a file or glob of JSON Lines orders (local or gs://).
	Input string
	// Output is the JSON Lines file of deduplicated orders; empty writes
	// nothing (tests read Result instead).
	Output string
	// Errors is the dead-letter file; empty means jsonl.ErrorsPath(Output)
	// when Output is set.
	Errors string
	// Dedup options are applied after the defaults PartitionBy("order_id"),
	// StateTTL(DefaultStateTTL) and UID(UID); a later option of a kind
	// replaces the default.
	Dedup []dedup.Option
}

// Result holds the pipeline's collections.
type Result struct {
	Rows        beam.PCollection // parsed input rows (Order)
	Deduped     beam.PCollection // one Order per order_id (Order)
	DeadLetters beam.PCollection // malformed lines and rejected rows (jsonl.ErrorLine)
}

// Build adds the orders pipeline to s.
func Build(s beam.Scope, cfg Config) (Result, error) {
	opts := append([]dedup.Option{rowspec.PartitionBy("order_id"), dedup.StateTTL(DefaultStateTTL), dedup.UID(UID)}, cfg.Dedup...)
	r, err := pipeline.Build(s.Scope("Orders"), pipeline.Spec{
		Input: cfg.Input, Output: cfg.Output, Errors: cfg.Errors,
		Row:  reflect.TypeFor[Order](),
		Step: pipeline.KeepFirst(opts...),
	})
	if err != nil {
		return Result{}, fmt.Errorf("orders: %w", err)
	}
	return Result{Rows: r.Rows, Deduped: r.Out, DeadLetters: r.DeadLetters}, nil
}

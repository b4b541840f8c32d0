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

// Config configures Build: the files, and KeepFirst options applied
// after the defaults PartitionBy("order_id"), StateTTL(DefaultStateTTL)
// and UID(UID).
type Config = pipeline.Config

// Result holds the pipeline's collections: the parsed Orders, one Order
// per order_id (Out), and the malformed lines and rejected rows
// (jsonl.ErrorLine).
type Result = pipeline.Result

// Build adds the orders pipeline to s.
func Build(s beam.Scope, cfg Config) (Result, error) {
	return pipeline.BuildKeepFirst(s, "Orders", cfg, reflect.TypeFor[Order](), nil,
		rowspec.PartitionBy("order_id"), dedup.StateTTL(DefaultStateTTL), dedup.UID(UID))
}

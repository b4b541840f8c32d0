package dedup_test

import (
	"fmt"
	"reflect"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// Trade is a row whose every column is part of its identity.
type Trade struct {
	TradeID string  `beam:"trade_id"`
	Ticker  string  `beam:"ticker"`
	Price   float64 `beam:"price"`
}

func init() { beam.RegisterType(reflect.TypeFor[Trade]()) }

// TryKeepFirst returns construction errors instead of panicking; each names
// the option and the fix.
func ExampleTryKeepFirst() {
	_, s := beam.NewPipelineWithRoot()
	trades := beam.Create(s, Trade{"t1", "ACME", 10})
	_, err := dedup.TryKeepFirst(s, trades, rowspec.PartitionBy("trade_id"), dedup.StateTTL(-time.Minute))
	fmt.Println(err)
	_, err = dedup.TryKeepFirst(s, trades, rowspec.PartitionBy("tradeid"))
	fmt.Println(err)
	// Output:
	// dedup.KeepFirst: StateTTL(-1m0s): it must be >= 0 (0 keeps state forever)
	// dedup.KeepFirst: PartitionBy(["tradeid"]): unknown column "tradeid" in row type dedup_test.Trade; available columns: trade_id, ticker, price
}

package dedup_test

import (
	"context"
	"fmt"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamdedup/beamdedup/transforms/dedup"
)

// UserEvent is a row type: a Go struct whose `beam` tags name the columns.
type UserEvent struct {
	UserID  string    `beam:"user_id"`
	Event   string    `beam:"event"`
	Rowtime time.Time `beam:"rowtime"`
}

// Order is a row of the orders example.
type Order struct {
	OrderID  string  `beam:"order_id"`
	Quantity int64   `beam:"quantity"`
	Price    float64 `beam:"price"`
}

// Change is a row of an updating input; Op holds +I, -U, +U or -D.
type Change struct {
	Op       string `beam:"op"`
	UserName string `beam:"user_name"`
	Event    string `beam:"event"`
}

func init() {
	beam.RegisterType(reflectType[UserEvent]())
	beam.RegisterType(reflectType[Order]())
	beam.RegisterType(reflectType[Change]())
}

// runExample runs p on Prism and returns the transform's counters.
func runExample(p *beam.Pipeline) dedup.Counters {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pr, err := beam.Run(ctx, "prism", p)
	if err != nil {
		panic(err)
	}
	return dedup.ReadCounters(pr)
}

// Keep the first row per key (spec 4.1.3.2), watermarkless: each key's
// first row is emitted at once.
func ExampleKeepFirst() {
	p, s := beam.NewPipelineWithRoot()
	rows := beam.Create(s,
		UserEvent{UserID: "u1", Event: "login"},
		UserEvent{UserID: "u1", Event: "login"},
		UserEvent{UserID: "u2", Event: "click"})
	kept := dedup.KeepFirst(s, rows, dedup.PartitionBy("user_id"), dedup.UID("user-events-dedup")).Rows
	_ = kept // write it somewhere: textio, pubsub, ...
	c := runExample(p)
	fmt.Println("in:", c.RowsIn, "emitted:", c.Emitted, "duplicates dropped:", c.DuplicatesDropped)
	// Output: in: 3 emitted: 2 duplicates dropped: 1
}

// The base case (spec 4.1.3.5): the earliest row per key by event time,
// emitted when the watermark reaches it, with a 5-minute state TTL.
func ExampleKeepFirst_eventTime() {
	p, s := beam.NewPipelineWithRoot()
	at := func(mm int) time.Time { return time.Date(2024, 1, 1, 10, mm, 0, 0, time.UTC) }
	rows := beam.Create(s,
		UserEvent{"u1", "click", at(2)},
		UserEvent{"u1", "view", at(1)},
		UserEvent{"u1", "scroll", at(6)})
	dedup.KeepFirst(s, rows,
		dedup.PartitionBy("user_id"),
		dedup.OnTime("rowtime"),
		dedup.StateTTL(5*time.Minute),
		dedup.UID("user-events-dedup"))
	c := runExample(p)
	fmt.Println("emitted:", c.Emitted, "pending:", c.Pending())
	// Output: emitted: 1 pending: 0
}

// Exact duplicates (spec 4.1.3.4): every column is the key.
func ExamplePartitionByAll() {
	p, s := beam.NewPipelineWithRoot()
	rows := beam.Create(s, Order{"o1", 1, 10}, Order{"o1", 1, 10}, Order{"o1", 2, 10})
	dedup.KeepFirst(s, rows, dedup.PartitionByAll())
	c := runExample(p)
	fmt.Println("emitted:", c.Emitted)
	// Output: emitted: 2
}

// An updating input (spec 4.1.3.7) becomes insert-only; rows with an
// unknown kind come out as dead letters with the reason.
func ExampleKeepFirst_changelog() {
	p, s := beam.NewPipelineWithRoot()
	rows := beam.Create(s,
		Change{"+I", "Vas", "login"},
		Change{"+U", "Vas", "click"},
		Change{"??", "Bob", "x"})
	res := dedup.KeepFirst(s, rows, dedup.PartitionBy("user_name"), dedup.KindColumn("op"))
	_, _ = res.Rows, res.DeadLetters
	c := runExample(p)
	fmt.Println("emitted:", c.Emitted, "dead-lettered:", c.DeadLettered)
	// Output: emitted: 1 dead-lettered: 1
}

// Construction errors are returned by TryKeepFirst and name the fix.
func ExampleTryKeepFirst() {
	_, s := beam.NewPipelineWithRoot()
	rows := beam.Create(s, Order{"o1", 1, 10})
	_, err := dedup.TryKeepFirst(s, rows, dedup.StateTTL(-time.Minute))
	fmt.Println(err)
	// Output: dedup.KeepFirst: StateTTL(-1m0s): it must be >= 0 (0 keeps state forever)
}

// KV input: the first value per key.
func ExampleKeepFirst_kv() {
	p, s := beam.NewPipelineWithRoot()
	kvs := beam.ParDo(s, splitPair, beam.Create(s, "a=1", "a=2", "b=3"))
	dedup.KeepFirst(s, kvs, dedup.StateTTL(time.Hour))
	c := runExample(p)
	fmt.Println("emitted:", c.Emitted)
	// Output: emitted: 2
}

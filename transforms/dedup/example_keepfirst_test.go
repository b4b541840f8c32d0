package dedup_test

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/teststream"

	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// Login is a row: a Go struct whose `beam` tags name the columns.
type Login struct {
	UserID string `beam:"user_id"`
	Device string `beam:"device"`
}

// firstLogins collects the kept rows: Prism runs the workers in this
// process, so the example reads them once the pipeline is done.
var firstLogins struct {
	sync.Mutex
	rows []Login
}

func keepLogin(l Login) {
	firstLogins.Lock()
	defer firstLogins.Unlock()
	firstLogins.rows = append(firstLogins.rows, l)
}

func init() {
	beam.RegisterType(reflect.TypeFor[Login]())
	register.Function1x0(keepLogin)
}

// KeepFirst without OnTime keeps each key's first row as it arrives and
// emits it at once; the key's later rows are dropped.
func ExampleKeepFirst() {
	ts := teststream.NewConfig()
	for i, l := range []Login{{"u1", "phone"}, {"u2", "laptop"}, {"u1", "laptop"}, {"u2", "laptop"}} {
		// One row at a time, in this order (the stream's arrival order).
		if err := ts.AddElements(int64(i+1)*1000, l); err != nil {
			panic(err)
		}
		if err := ts.AdvanceWatermark(int64(i+1) * 1000); err != nil {
			panic(err)
		}
	}
	if err := ts.AdvanceWatermarkToInfinity(); err != nil {
		panic(err)
	}

	p, s := beam.NewPipelineWithRoot()
	first := dedup.KeepFirst(s, teststream.Create(s, ts),
		rowspec.PartitionBy("user_id"),
		dedup.StateTTL(24*time.Hour), // how long a key is remembered
		dedup.UID("first-logins"))    // stable step names, so state survives updates
	beam.ParDo0(s, keepLogin, first.Rows)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := beam.Run(ctx, "prism", p); err != nil {
		panic(err)
	}
	sort.Slice(firstLogins.rows, func(i, j int) bool { return firstLogins.rows[i].UserID < firstLogins.rows[j].UserID })
	for _, l := range firstLogins.rows {
		fmt.Println(l.UserID, l.Device)
	}
	// Output:
	// u1 phone
	// u2 laptop
}

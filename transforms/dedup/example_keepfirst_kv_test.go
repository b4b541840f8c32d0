package dedup_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/teststream"

	"github.com/beamdedup/beamdedup/transforms/dedup"
)

// pageOf splits "user=page" into a KV keyed by the user.
func pageOf(visit string) (string, string) {
	user, page, _ := strings.Cut(visit, "=")
	return user, page
}

// firstPages collects the kept KVs (Prism runs the workers in this
// process).
var firstPages struct {
	sync.Mutex
	lines []string
}

func keepPage(user, page string) {
	firstPages.Lock()
	defer firstPages.Unlock()
	firstPages.lines = append(firstPages.lines, user+" "+page)
}

func init() {
	register.Function1x2(pageOf)
	register.Function2x0(keepPage)
}

// KV input: the first value per key, keyed by the KV's key (no
// PartitionBy).
func ExampleKeepFirst_kv() {
	ts := teststream.NewConfig()
	for i, v := range []string{"u1=/home", "u1=/cart", "u2=/search"} {
		if err := ts.AddElements(int64(i+1)*1000, v); err != nil {
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
	visits := beam.ParDo(s, pageOf, teststream.Create(s, ts))
	beam.ParDo0(s, keepPage, dedup.KeepFirst(s, visits, dedup.StateTTL(time.Hour)).Rows)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := beam.Run(ctx, "prism", p); err != nil {
		panic(err)
	}
	sort.Strings(firstPages.lines)
	for _, l := range firstPages.lines {
		fmt.Println(l)
	}
	// Output:
	// u1 /home
	// u2 /search
}

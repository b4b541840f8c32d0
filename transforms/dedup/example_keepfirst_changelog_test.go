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

	"github.com/beamdedup/beamdedup/transforms/deadletter"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// Profile is a row of an updating input: Op holds +I, -U, +U or -D.
type Profile struct {
	Op       string `beam:"op"`
	UserName string `beam:"user_name"`
	City     string `beam:"city"`
}

// profileOut collects the kept rows and the dead letters (Prism runs the
// workers in this process).
var profileOut struct {
	sync.Mutex
	lines []string
}

func keepProfile(p Profile) { addProfileLine(fmt.Sprintf("kept %s %s %s", p.Op, p.UserName, p.City)) }

func deadProfile(d deadletter.DeadLetter) { addProfileLine("dead letter: " + d.Reason) }

func addProfileLine(l string) {
	profileOut.Lock()
	defer profileOut.Unlock()
	profileOut.lines = append(profileOut.lines, l)
}

func init() {
	beam.RegisterType(reflect.TypeFor[Profile]())
	register.Function1x0(keepProfile)
	register.Function1x0(deadProfile)
}

// An updating input becomes insert-only: each key's first +I or +U is kept
// (as +I), its later changes are swallowed, and a row of an unknown kind
// comes out as a dead letter with the reason.
func ExampleKeepFirst_changelog() {
	ts := teststream.NewConfig()
	for i, r := range []Profile{{"+I", "Vas", "Oslo"}, {"-U", "Vas", "Oslo"}, {"+U", "Vas", "Rome"}, {"??", "Bob", "Lima"}} {
		if err := ts.AddElements(int64(i+1)*1000, r); err != nil {
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
	res := dedup.KeepFirst(s, teststream.Create(s, ts), rowspec.PartitionBy("user_name"), rowspec.KindColumn("op"))
	beam.ParDo0(s, keepProfile, res.Rows)
	beam.ParDo0(s, deadProfile, res.DeadLetters)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := beam.Run(ctx, "prism", p); err != nil {
		panic(err)
	}
	sort.Strings(profileOut.lines)
	for _, l := range profileOut.lines {
		fmt.Println(l)
	}
	// Output:
	// dead letter: KindColumn "op": unknown row kind "??": want one of +I, -U, +U, -D
	// kept +I Vas Oslo
}

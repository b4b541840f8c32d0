package dedup

import (
	"reflect"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/stretchr/testify/require"
)

func TestSmokeKeyedWatermarkless(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	in := beam.Create(s, smokeRow{"Vas", "login"}, smokeRow{"Vas", "click"}, smokeRow{"Bob", "x"})
	out, err := TryKeepFirst(s, in, PartitionBy("user_name"), ForceStateful())
	require.NoError(t, err)
	passert.Count(s, out, "n", 2)
	pr, err := ptest.RunWithMetrics(p)
	require.NoError(t, err)
	t.Logf("%+v", ReadCounters(pr))
}

type smokeRow struct {
	UserName string `beam:"user_name"`
	Event    string `beam:"event"`
}

func init() { beam.RegisterType(reflect.TypeFor[smokeRow]()) }

func TestMain(m *testing.M) { ptest.MainWithDefault(m, "prism") }

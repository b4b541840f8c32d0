package dedup

import (
	"reflect"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/timers"
	"github.com/stretchr/testify/assert"

	"github.com/beamdedup/beamdedup/transforms/dedup/internal/core"
)

var pipelineTimerType = reflect.TypeFor[timers.PipelineTimer]()

func timerFields(t reflect.Type) int {
	n := 0
	for i := range t.NumField() {
		if t.Field(i).Type.Implements(pipelineTimerType) {
			n++
		}
	}
	return n
}

// Regression guard for the Beam Go 2.77 hang (notes/beam-defects.md #1): a
// DoFn with two timer fields hangs after its first bundle, so no variant may
// declare more than one (Beam looks at a DoFn's top-level fields only).
func TestVariants_DeclareAtMostOneTimerField(t *testing.T) {
	for _, v := range []any{marksFn{}, marksEventFn{}, marksProcFn{}, versionsFn{}, versionsEventFn{}, versionsProcFn{}} {
		assert.LessOrEqual(t, timerFields(reflect.TypeOf(v)), 1, "%T", v)
	}
}

// Every option combination maps to one family, and the family matches the
// variant statefulStep picks.
func TestVariants_EveryConfigurationNeedsAtMostOneTimerFamily(t *testing.T) {
	for _, eventTime := range []bool{false, true} {
		for _, stateTTL := range []int64{0, int64(time.Minute / time.Millisecond)} {
			for _, eventTTL := range []int64{0, 1000} {
				for _, cleanup := range []bool{false, true} {
					c := core.Config{EventTime: eventTime, StateTTL: stateTTL, EventTTL: eventTTL, CleanupTimers: cleanup}
					f := c.Family()
					switch {
					case eventTime:
						assert.Equal(t, core.EventTimeFamily, f, "%+v", c)
					case !cleanup:
						assert.Equal(t, core.NoFamily, f, "bounded input sets no timer: %+v", c)
					case eventTTL > 0:
						assert.Equal(t, core.EventTimeFamily, f, "%+v", c)
					case stateTTL > 0:
						assert.Equal(t, core.ProcessingTimeFamily, f, "%+v", c)
					default:
						assert.Equal(t, core.NoFamily, f, "%+v", c)
					}
				}
			}
		}
	}
}

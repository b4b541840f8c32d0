package step

import (
	"context"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"

	beamcore "github.com/apache/beam/sdks/v2/go/pkg/beam/core"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/exec"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
)

// What the overlapped requests (overlap.go) rely on in the Beam Go SDK, and
// how the step checks it before it relies on it. Beam does not document
// that a state provider outlives its element's call, is the element's
// alone and may be used from another goroutine (notes/overlapped-state.md
// has the SDK's lines); TestBeamStateProvidersOutliveTheirElement checks
// it on a real harness. So the step overlaps only on an SDK that test
// passed on, and only on the provider type the harness hands a DoFn; on
// anything else it waits for each request, which is correct and slower.

// vettedSDKs are the Beam Go SDK versions the reliance was checked on
// (TestBeamStateProvidersOutliveTheirElement); on any other the step waits
// for each request. A version is the SDK's own constant (core.SdkVersion),
// compiled into the binary that runs the step.
var vettedSDKs = []string{"2.77.0"}

// sdkVetted reports whether this binary's SDK is one the reliance was
// checked on, and logs once per step when it is not.
func sdkVetted(ctx context.Context, name string, sw *switches) bool {
	if slices.Contains(vettedSDKs, beamcore.SdkVersion) {
		return true
	}
	sw.unvetted.Do(func() {
		log.Warnf(ctx, "dedup: the stateful step %s waits for each state request: overlapping them was checked on Beam Go %v, not %v", name, vettedSDKs, beamcore.SdkVersion)
	})
	return false
}

// harnessProvider is the type of the state provider Beam's harness hands a
// DoFn, the one the reliance test checks: a pointer to what the SDK's
// exec.UserStateAdapter.NewStateProvider returns (exec/fn.go hands the DoFn
// its address). Taken from the SDK's own signature, so that it follows the
// SDK rather than a name written here; nil if the SDK no longer has it.
var harnessProvider = func() reflect.Type {
	m, ok := reflect.TypeFor[exec.UserStateAdapter]().MethodByName("NewStateProvider")
	if !ok || m.Type.NumOut() == 0 {
		return nil
	}
	return reflect.PointerTo(m.Type.Out(0))
}()

// isHarnessProvider reports whether a provider of type t is the harness's.
func isHarnessProvider(t reflect.Type) bool { return t != nil && t == harnessProvider }

// switches are what a step learns about the SDK while it runs: they hold
// for every DoFn instance of the step in the process (a failed bundle's
// retry may run on another instance) and for no other step.
type switches struct {
	// reused is set once the SDK handed two elements of a bundle the same
	// state provider: the step then waits for each request.
	reused atomic.Bool
	// unvetted and others log, once for the step, that it waits for each
	// request on an SDK not vetted or on a provider of another type (a
	// test's own state backend would otherwise log it per DoFn instance).
	unvetted sync.Once
	others   sync.Map // reflect.Type -> true
}

// stepSwitches are the switches of each step, by its counters' namespace
// (the transform and its UID).
var stepSwitches sync.Map

func switchesOf(step string) *switches {
	if sw, ok := stepSwitches.Load(step); ok {
		return sw.(*switches)
	}
	sw, _ := stepSwitches.LoadOrStore(step, &switches{})
	return sw.(*switches)
}

// resetSwitches forgets what every step learnt, for tests.
func resetSwitches() { stepSwitches.Clear() }

package step

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	beamcore "github.com/apache/beam/sdks/v2/go/pkg/beam/core"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/timers"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/testing/prismtest"
)

// What the overlapped requests rely on in the SDK, which Beam does not
// document (notes/overlapped-state.md): each element, and each timer
// firing, gets a state provider of its own, of the harness's type; the
// provider still works after ProcessElement (or OnTimer) returned, from
// another goroutine, with other providers' requests in flight on the same
// state channel, and reads and writes the state of its own element's key
// and window. providerProbeFn holds every provider of a bundle and uses
// them all at once from goroutines in FinishBundle: a PE's provider
// appends its key to the key's bag; a firing's provider (a later bundle)
// reads the bag, which must hold exactly its key.
type providerProbeFn struct {
	Seen  state.Bag[string]
	Check timers.EventTime

	held []probeUse
}

// probeUse is a provider held past its call.
type probeUse struct {
	sp     state.Provider
	key    string
	firing bool
}

// probeLog collects what the probe saw, in this process (LOOPBACK).
var probeLog struct {
	sync.Mutex
	types     map[reflect.Type]bool
	failures  []string
	appended  int
	readBack  int
	providers int
}

func (f *providerProbeFn) StartBundle() { f.held = f.held[:0] }

func (f *providerProbeFn) hold(sp state.Provider, key string, firing bool) {
	probeLog.Lock()
	defer probeLog.Unlock()
	probeLog.types[reflect.TypeOf(sp)] = true
	probeLog.providers++
	for _, h := range f.held {
		if h.sp == sp {
			probeLog.failures = append(probeLog.failures, fmt.Sprintf("key %q got the provider of key %q, earlier in its bundle", key, h.key))
		}
	}
	f.held = append(f.held, probeUse{sp: sp, key: key, firing: firing})
}

func (f *providerProbeFn) ProcessElement(ts beam.EventTime, sp state.Provider, tp timers.Provider, key, _ string) {
	f.hold(sp, key, false)
	f.Check.Set(tp, ts.ToTime())
}

func (f *providerProbeFn) OnTimer(sp state.Provider, _ timers.Provider, key string, _ timers.Context) {
	f.hold(sp, key, true)
}

// FinishBundle uses every provider of the bundle at once, each from a
// goroutine of its own, after the calls they came with returned.
func (f *providerProbeFn) FinishBundle() error {
	var wg sync.WaitGroup
	for _, h := range f.held {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, _, err := f.Seen.Read(h.sp)
			var failure string
			switch {
			case err != nil:
				failure = fmt.Sprintf("key %q: read: %v", h.key, err)
			case !h.firing && len(got) != 0:
				failure = fmt.Sprintf("key %q, a new key, read %q: another key's state", h.key, got)
			case h.firing && !slices.Equal(got, []string{h.key}):
				failure = fmt.Sprintf("key %q's firing read %q, want what its element appended, [%q]", h.key, got, h.key)
			case !h.firing:
				if err := f.Seen.Add(h.sp, h.key); err != nil {
					failure = fmt.Sprintf("key %q: append: %v", h.key, err)
				}
			}
			probeLog.Lock()
			defer probeLog.Unlock()
			switch {
			case failure != "":
				probeLog.failures = append(probeLog.failures, failure)
			case h.firing:
				probeLog.readBack++
			default:
				probeLog.appended++
			}
		}()
	}
	wg.Wait()
	return nil
}

func probeKey(v string) (string, string) { return v, v }

func init() {
	beam.RegisterType(reflect.TypeFor[providerProbeFn]())
	register.Function1x2(probeKey)
}

// TestBeamStateProvidersOutliveTheirElement fails if a Beam upgrade breaks
// what the stateful step's overlapped requests rely on, and if the SDK is
// not one they were checked on (the step then waits for each request:
// vettedSDKs). Run it on a new SDK, under -race too, before adding it there.
func TestBeamStateProvidersOutliveTheirElement(t *testing.T) {
	const keys = 300
	probeLog.Lock()
	probeLog.types, probeLog.failures, probeLog.appended, probeLog.readBack, probeLog.providers = map[reflect.Type]bool{}, nil, 0, 0, 0
	probeLog.Unlock()

	p, s := beam.NewPipelineWithRoot()
	var in []string
	for i := range keys {
		in = append(in, fmt.Sprintf("key-%d", i))
	}
	keyed := beam.ParDo(s, probeKey, beam.CreateList(s, in))
	beam.ParDo0(s, &providerProbeFn{Seen: state.MakeBagState[string]("seen"), Check: timers.InEventTime("check")}, keyed)
	prismtest.Run(t, p, 2*time.Minute)

	probeLog.Lock()
	defer probeLog.Unlock()
	assert.Empty(t, probeLog.failures[:min(10, len(probeLog.failures))], "%d uses of a state provider after its call, from another goroutine, alongside the others, failed (the first 10 shown)", len(probeLog.failures))
	assert.Equal(t, keys, probeLog.appended, "every element's append through its held provider")
	assert.Equal(t, keys, probeLog.readBack, "every firing read back its element's append through its held provider")
	assert.Equal(t, 2*keys, probeLog.providers, "a provider per element and per firing")
	require.NotNil(t, harnessProvider, "exec.UserStateAdapter.NewStateProvider names the harness's provider type")
	assert.Equal(t, map[reflect.Type]bool{harnessProvider: true}, probeLog.types, "the harness's provider type, which the step vets")
	require.Contains(t, vettedSDKs, beamcore.SdkVersion,
		"Beam Go %s is not among the SDKs the overlapped state requests were checked on, so the stateful step waits for each request: if this test passes under -race, add it to vettedSDKs (reliance.go) and to notes/overlapped-state.md", beamcore.SdkVersion)
}

// The step waits for each request on an SDK not vetted, and on a state
// provider that is not the harness's (a test's own backend).
func TestOverlap_FallsBackToWaitingWhereNotVetted(t *testing.T) {
	ctx := context.Background()
	s := testStep(&fakeStore{}, reflect.TypeFor[[]byte](), OverlapBatch)
	require.True(t, s.Overlapping(), "the SDK of this build is vetted")

	was := vettedSDKs
	vettedSDKs = []string{"0.0.0"}
	t.Cleanup(func() { vettedSDKs = was })
	assert.False(t, testStep(&fakeStore{}, reflect.TypeFor[[]byte](), OverlapBatch).Overlapping(), "an SDK not vetted")
	vettedSDKs = was

	require.NoError(t, s.io.admit(ctx, fakeProvider{}))
	assert.False(t, s.Overlapping(), "a provider of another type")
}

// fakeProvider is a state backend of a test's own.
type fakeProvider struct{ state.Provider }

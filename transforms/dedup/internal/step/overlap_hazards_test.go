package step

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/typex"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/testing/statetest"
)

// The overlapped requests' hazards, each alone: a request that panics,
// fails or is never answered, a provider an earlier element still holds,
// and a read of a key the bundle's cache forgot while its writes are in
// flight.

// stepDriver drives one KeepLast step (a versions DoFn) on a backend
// that stands for the harness's provider, calling the step as its DoFn's
// methods do.
type stepDriver struct {
	t   *testing.T
	s   *Step
	b   *statetest.Bags
	out []string
}

func newStepDriver(t *testing.T, name string, mode OverlapMode) *stepDriver {
	t.Helper()
	f := &testVersionsFn{State: state.MakeBagState[[]byte]("keeplast"), Untimed: Untimed{P: Params{
		Last: true, KeyType: beam.EncodedType{T: reflect.TypeFor[[]byte]()}, ValueType: beam.EncodedType{T: reflect.TypeFor[overlapRow]()},
		KindCol: "op", OutKindCol: "op", Metrics: name, Overlap: mode,
	}}}
	require.NoError(t, f.Setup())
	trustTheBackend(&f.s) // the backend stands for the harness's
	b := statetest.NewBags()
	b.Jitter = false
	return &stepDriver{t: t, s: &f.s, b: b}
}

func (d *stepDriver) emit(ts beam.EventTime, _ beam.T, v beam.V) {
	r := v.(overlapRow)
	d.out = append(d.out, fmt.Sprintf("%s %s#%d", r.Op, r.Key, r.N))
}

// provider is a new element's provider for key.
func (d *stepDriver) provider(key string) *statetest.Provider {
	return &statetest.Provider{Bags: d.b, Key: key}
}

func (d *stepDriver) start() {
	d.b.Bundle(true)
	d.s.startBundle()
}

// row hands the step row n of key, with sp (nil: a provider of its own).
func (d *stepDriver) row(sp *statetest.Provider, key string, n int) error {
	if sp == nil {
		sp = d.provider(key)
	}
	r := overlapRow{Key: key, Op: "+I", N: n}
	return d.s.add(context.Background(), typex.NoFiringPane(), window.GlobalWindow{}, beam.EventTime(1000+n), sp, []byte(key), r, d.emit, d.emit)
}

func (d *stepDriver) finish() error {
	defer d.b.Bundle(false)
	return d.s.finishBundle(context.Background(), d.emit, d.emit)
}

// within runs f, failing the test if it has not returned in 30 s: a step
// that hangs fails here, not at the test binary's timeout.
func within(t *testing.T, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("the step did not return in 30 s")
		return nil
	}
}

// A panic on a request's goroutine (a store's decoding runs there) fails
// the bundle with the panic and its stack, in either overlapped mode, and
// the worker goes on: the next bundle runs.
func TestOverlap_APanicOnARequestGoroutineFailsTheBundleWithItsStack(t *testing.T) {
	for _, tc := range []struct {
		mode OverlapMode
		what string // the request that panics
	}{{OverlapBatch, "get"}, {OverlapWrites, "append"}} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			d := newStepDriver(t, "panic-test", tc.mode)
			d.b.Before = func(what, key string) error {
				if what == tc.what && key == "k2" {
					panicInTheStore()
				}
				return nil
			}
			d.start()
			var err error
			for i, k := range []string{"k1", "k2", "k3"} {
				err = errors.Join(err, d.row(nil, k, i))
			}
			err = errors.Join(err, d.finish())
			require.Error(t, err)
			assert.Contains(t, err.Error(), `panicked: the store broke`)
			assert.Contains(t, err.Error(), `key "k2"`)
			assert.Contains(t, err.Error(), "panicInTheStore", "the panic's stack")
			assert.Contains(t, err.Error(), "panic-test", "the step")

			d.b.Before, d.out = nil, nil
			d.start()
			require.NoError(t, d.row(nil, "k4", 4))
			require.NoError(t, d.finish())
			assert.Equal(t, []string{"+I k4#4"}, d.out, "the next bundle")
		})
	}
}

func panicInTheStore() { panic("the store broke") }

// A request the runner never answers fails the bundle once the deadline
// passes, naming the step and the request, wherever the step waits for
// it: a batch's read, or FinishBundle's wait for a write. The next bundle
// makes its requests anew.
func TestOverlap_ARequestNeverAnsweredFailsTheBundleNamingTheStepAndTheRequest(t *testing.T) {
	for _, tc := range []struct {
		mode OverlapMode
		what string // the request never answered
		want string
	}{
		{OverlapBatch, "get", `waited 50ms for the read of key "k2"`},
		{OverlapWrites, "append", `waited 50ms for every request of the bundle to be answered (the write of key "k2" is not answered)`},
	} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			d := newStepDriver(t, "hang-test", tc.mode)
			d.s.requests().deadline = 50 * time.Millisecond
			never := make(chan struct{})
			t.Cleanup(func() { close(never) })
			d.b.Before = func(what, key string) error {
				if what == tc.what && key == "k2" {
					<-never
				}
				return nil
			}
			d.start()
			err := within(t, func() error {
				var err error
				for i, k := range []string{"k1", "k2", "k3"} {
					err = errors.Join(err, d.row(nil, k, i))
				}
				return errors.Join(err, d.finish())
			})
			require.Error(t, err)
			assert.Contains(t, err.Error(), "the stateful step hang-test "+tc.want)

			// The request never answered still runs its hook: the next
			// bundle's key is one the hook lets through.
			d.out = nil
			d.start()
			require.NoError(t, within(t, func() error {
				return errors.Join(d.row(nil, "k4", 4), d.finish())
			}))
			assert.Equal(t, []string{"+I k4#4"}, d.out, "the next bundle")
		})
	}
}

// A failed request fails its bundle (from the step's next call, or from
// FinishBundle), and no later request of its key is made, so nothing of
// the key is half-written; other keys' requests go on, and the next bundle
// runs.
func TestOverlap_AFailedRequestFailsTheBundleAndNoLaterRequestOfItsKeyIsMade(t *testing.T) {
	for _, mode := range []OverlapMode{OverlapBatch, OverlapWrites} {
		t.Run(mode.String(), func(t *testing.T) {
			d := newStepDriver(t, "fail-test", mode)
			refused := errors.New("the runner refused the append")
			d.b.Before = func(what, key string) error {
				if what == "append" && key == "k1" {
					return refused
				}
				return nil
			}
			d.start()
			err := d.row(nil, "k2", 1) // k2's requests are made before k1's fails
			err = errors.Join(err, d.row(nil, "k1", 2))
			err = errors.Join(err, d.row(nil, "k1", 3))
			err = errors.Join(err, d.finish())
			require.ErrorIs(t, err, refused)
			assert.Equal(t, []string{"get"}, d.b.Log["k1"], "the append refused, none after it")
			assert.Equal(t, []string{"get", "append"}, d.b.Log["k2"])

			d.b.Before = nil
			d.start()
			require.NoError(t, d.row(nil, "k3", 3))
			require.NoError(t, d.finish())
		})
	}
}

// A provider that a row of the batch or a request in flight still holds,
// handed to a later element, fails the bundle: the earlier element would
// read or write through it the state of another key. From then on the step
// waits for each request, in every DoFn instance of the step in the
// process and in no other step. An earlier element's provider that nothing
// holds any more is harmless.
func TestOverlap_AProviderAnEarlierElementStillHoldsFailsTheBundle(t *testing.T) {
	t.Cleanup(resetSwitches)
	t.Run("held by a row of the batch", func(t *testing.T) {
		resetSwitches()
		d := newStepDriver(t, "reuse-batch", OverlapBatch)
		d.start()
		sp := d.provider("k1")
		require.NoError(t, d.row(sp, "k1", 1))
		err := d.row(sp, "k2", 2)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "the stateful step reuse-batch: Beam handed an element a state provider that an earlier element of the bundle still holds")
		assert.False(t, d.s.Overlapping(), "the step waits for each request")
		assert.False(t, newStepDriver(t, "reuse-batch", OverlapBatch).s.Overlapping(), "so does another instance of the step")
		assert.True(t, newStepDriver(t, "another-step", OverlapBatch).s.Overlapping(), "another step does not")

		d.out = nil
		d.start()
		require.NoError(t, d.row(nil, "k1", 1))
		require.NoError(t, d.row(nil, "k2", 2))
		require.NoError(t, d.finish())
		assert.Equal(t, []string{"+I k1#1", "+I k2#2"}, d.out, "the retry, waiting for each request")

		resetSwitches()
		assert.True(t, newStepDriver(t, "reuse-batch", OverlapBatch).s.Overlapping(), "reset")
	})
	t.Run("held by a request in flight", func(t *testing.T) {
		resetSwitches()
		d := newStepDriver(t, "reuse-flight", OverlapWrites)
		d.s.requests().deadline = 50 * time.Millisecond // the failed bundle waits no longer for the append held back
		release := make(chan struct{})
		t.Cleanup(func() { close(release) })
		d.b.Before = func(what, key string) error {
			if what == "append" {
				<-release
			}
			return nil
		}
		d.start()
		sp := d.provider("k1")
		require.NoError(t, d.row(sp, "k1", 1)) // its append is in flight
		err := within(t, func() error { return d.row(sp, "k2", 2) })
		require.Error(t, err)
		assert.Contains(t, err.Error(), "still holds")
		assert.False(t, d.s.Overlapping())
		assert.Empty(t, d.b.Overlaps)
	})
	t.Run("held by nothing", func(t *testing.T) {
		resetSwitches()
		d := newStepDriver(t, "reuse-none", OverlapWrites)
		d.start()
		sp := d.provider("k1")
		require.NoError(t, d.row(sp, "k1", 1))
		require.NoError(t, d.s.requests().settle([]byte("k1")))
		sp.Key = "k2" // the provider now names another key, as the SDK's would
		require.NoError(t, d.row(sp, "k2", 2))
		require.NoError(t, d.finish())
		assert.True(t, d.s.Overlapping())
		assert.Equal(t, []string{"+I k1#1", "+I k2#2"}, d.out)
	})
}

// A key the bundle's cache forgot (it holds at most max keys) while the
// key's write is in flight is read again only once that write is answered
// (settle): the read sees it, and the key's requests stay one at a time.
// With a cache of one key every other row forgets one. Every append is
// held unanswered until the step has gone as far as it can without it
// (synctest.Wait: the step's goroutines are all blocked), so a read that
// did not wait for it would be made while it is held; the output and the
// requests are those of the step waiting for each request.
func TestOverlap_AReadOfAKeyTheCacheForgotWaitsForItsWritesInFlight(t *testing.T) {
	keys := []string{"k1", "k2", "k1", "k3", "k2", "k1"}
	run := func(t *testing.T, mode OverlapMode) *stepDriver {
		d := newStepDriver(t, "settle-test", mode)
		d.s.cache.max = 1
		var (
			mu   sync.Mutex
			held = map[string]chan struct{}{} // the appends held, by key
		)
		d.b.Before = func(what, key string) error {
			mu.Lock()
			release, writing := held[key]
			if what == "append" {
				release = make(chan struct{})
				held[key] = release
			}
			mu.Unlock()
			switch {
			case what == "append":
				<-release
			case writing:
				t.Errorf("the %s of %s was made while its append was in flight", what, key)
			}
			return nil
		}
		// step calls f, answering the appends held whenever the step
		// waits for them, until f returns.
		step := func(f func() error) {
			done := make(chan error, 1)
			go func() { done <- f() }()
			for {
				synctest.Wait()
				select {
				case err := <-done:
					require.NoError(t, err)
					return
				default:
				}
				mu.Lock()
				require.NotEmpty(t, held, "the step waits, and no append is held")
				for k, release := range held {
					close(release)
					delete(held, k)
				}
				mu.Unlock()
			}
		}
		d.start()
		for i, k := range keys {
			step(func() error { return d.row(nil, k, i) })
		}
		step(d.finish)
		return d
	}
	var want *stepDriver
	synctest.Test(t, func(t *testing.T) { want = run(t, WaitEach) })
	require.True(t, strings.HasPrefix(want.out[0], "+I k1"))
	for _, mode := range []OverlapMode{OverlapBatch, OverlapWrites} {
		t.Run(mode.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				got := run(t, mode)
				assert.Equal(t, want.out, got.out)
				assert.Equal(t, want.b.Log, got.b.Log, "each key's requests, in order")
				assert.Equal(t, []string{"get", "append", "get", "append", "get", "append"}, got.b.Log["k1"], "k1 read again after each write")
				assert.Empty(t, got.b.Overlaps, "two requests of a key at once")
				assert.Equal(t, want.b.Cells, got.b.Cells)
			})
		})
	}
}

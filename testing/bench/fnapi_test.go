// The state request counter: it counts the Fn API state requests that the
// SDK harnesses of this process send to their runner, by kind (get,
// append, clear) and by user state ID: what a stateful step costs on a
// portable runner, where each request is a synchronous round trip. It also
// follows each request until it is answered, against the end of its bundle
// (StateFlights): how many were in flight at once, and whether any was
// answered after its bundle ended. It works for workers in this process
// (LOOPBACK: Prism in process, as the benchmarks run it), by wrapping the
// dialer Beam's harness uses (grpcx.Dial) with a stream interceptor on the
// state and control streams. CountStateRequests must run before the first
// pipeline of the process: a harness dials its state channel once.

package bench

import (
	"context"
	"math"
	"sync"
	"time"

	fnpb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/fnexecution_v1"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/util/grpcx"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// The Fn API's state and control streams.
const (
	stateMethod   = "/org.apache.beam.model.fn_execution.v1.BeamFnState/State"
	controlMethod = "/org.apache.beam.model.fn_execution.v1.BeamFnControl/Control"
)

// StateRequests are state requests by kind.
type StateRequests struct {
	Gets, Appends, Clears int64
}

// Total is the number of requests.
func (r StateRequests) Total() int64 { return r.Gets + r.Appends + r.Clears }

var (
	mu      sync.Mutex
	byState = map[string]*StateRequests{}
	flights = newFlightLog()
	install sync.Once
)

// CountStateRequests makes every harness of this process that dials after it count its
// state requests. It is idempotent.
func CountStateRequests() {
	install.Do(func() {
		grpcx.Dial = func(ctx context.Context, endpoint string, timeout time.Duration) (*grpc.ClientConn, error) {
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			// grpcx.DefaultDial's options, plus the interceptor.
			return grpc.DialContext(ctx, endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithBlock(),
				grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(math.MaxInt32)),
				grpc.WithChainStreamInterceptor(intercept))
		}
	})
}

// ResetStateRequests forgets the requests counted and followed so far.
func ResetStateRequests() {
	mu.Lock()
	defer mu.Unlock()
	clear(byState)
	flights = newFlightLog()
}

// StateRequestsOf returns the requests counted on the user state called id, over every
// step that declares one.
func StateRequestsOf(id string) StateRequests {
	mu.Lock()
	defer mu.Unlock()
	if r := byState[id]; r != nil {
		return *r
	}
	return StateRequests{}
}

// AllStateRequests returns the requests counted, by user state ID ("" for requests that
// are not on user state, such as side inputs).
func AllStateRequests() map[string]StateRequests {
	mu.Lock()
	defer mu.Unlock()
	out := make(map[string]StateRequests, len(byState))
	for id, r := range byState {
		out[id] = *r
	}
	return out
}

func intercept(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	cs, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		return cs, err
	}
	switch method {
	case stateMethod:
		return &countingStream{ClientStream: cs}, nil
	case controlMethod:
		return controlStream{cs}, nil
	}
	return cs, nil
}

// countingStream counts the state requests sent on it and follows each
// until its answer comes back on it. (Request IDs are unique per stream.)
type countingStream struct{ grpc.ClientStream }

func (s *countingStream) SendMsg(m any) error {
	if req, ok := m.(*fnpb.StateRequest); ok {
		count(req)
		flightSent(s, req)
	}
	return s.ClientStream.SendMsg(m)
}

func (s *countingStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if resp, ok := m.(*fnpb.StateResponse); ok && err == nil {
		flightAnswered(s, resp)
	}
	return err
}

// controlStream sees the harness report each bundle done.
type controlStream struct{ grpc.ClientStream }

func (s controlStream) SendMsg(m any) error {
	if resp, ok := m.(*fnpb.InstructionResponse); ok && resp.GetProcessBundle() != nil {
		bundleEnded(resp.GetInstructionId())
	}
	return s.ClientStream.SendMsg(m)
}

func count(req *fnpb.StateRequest) {
	id := req.GetStateKey().GetBagUserState().GetUserStateId()
	mu.Lock()
	defer mu.Unlock()
	r := byState[id]
	if r == nil {
		r = &StateRequests{}
		byState[id] = r
	}
	switch req.GetRequest().(type) {
	case *fnpb.StateRequest_Get:
		r.Gets++
	case *fnpb.StateRequest_Append:
		r.Appends++
	case *fnpb.StateRequest_Clear:
		r.Clears++
	}
}

// Flights is how the state requests sent since Reset went, against their
// bundles (instructions): a bundle ends when its harness reports it done
// to the runner.
type Flights struct {
	// Bundles is the number of bundles that sent a state request.
	Bundles int
	// MaxInFlight is the most requests of one bundle sent and not yet
	// answered at once: 1 for a step that waits for each in turn.
	MaxInFlight int
	// Answered is the number of requests answered.
	Answered int64
	// AfterEnd is the number of requests sent, or answered, after their
	// bundle ended: 0 for a step that waits for its requests in time.
	AfterEnd int64
	// Unanswered is the number of requests sent and never answered.
	Unanswered int64
}

// flightLog follows requests until they are answered.
type flightLog struct {
	pending  map[flightID]string // request -> its bundle
	inFlight map[string]int      // bundle -> requests in flight
	ended    map[string]bool
	f        Flights
}

type flightID struct {
	stream *countingStream
	id     string
}

func newFlightLog() *flightLog {
	return &flightLog{pending: map[flightID]string{}, inFlight: map[string]int{}, ended: map[string]bool{}}
}

func flightSent(s *countingStream, req *fnpb.StateRequest) {
	mu.Lock()
	defer mu.Unlock()
	l, b := flights, req.GetInstructionId()
	if _, seen := l.inFlight[b]; !seen {
		l.f.Bundles++
	}
	l.pending[flightID{s, req.GetId()}] = b
	l.inFlight[b]++
	l.f.MaxInFlight = max(l.f.MaxInFlight, l.inFlight[b])
	if l.ended[b] {
		l.f.AfterEnd++
	}
}

func flightAnswered(s *countingStream, resp *fnpb.StateResponse) {
	mu.Lock()
	defer mu.Unlock()
	l := flights
	k := flightID{s, resp.GetId()}
	b, ok := l.pending[k]
	if !ok {
		return // sent before Reset
	}
	delete(l.pending, k)
	l.inFlight[b]--
	l.f.Answered++
	if l.ended[b] {
		l.f.AfterEnd++
	}
}

func bundleEnded(instruction string) {
	mu.Lock()
	defer mu.Unlock()
	flights.ended[instruction] = true
}

// StateFlights returns how the requests sent since Reset went.
func StateFlights() Flights {
	mu.Lock()
	defer mu.Unlock()
	f := flights.f
	f.Unanswered = int64(len(flights.pending))
	return f
}

// Package fnapitest counts the Fn API state requests that the SDK harnesses
// of this process send to their runner, by kind (get, append, clear) and by
// user state ID: what a stateful step costs on a portable runner, where
// each request is a synchronous round trip. It works for workers in this
// process (LOOPBACK: Prism in process, as the tests run it), by wrapping
// the dialer Beam's harness uses (grpcx.Dial) with a stream interceptor.
//
//	func TestMain(m *testing.M) { fnapitest.Install(); prismtest.Main(m) }
//	...
//	fnapitest.Reset()
//	run(p)
//	r := fnapitest.Of("keepfirst") // the requests on state "keepfirst"
//
// Install must run before the first pipeline of the process: a harness
// dials its state channel once.
package fnapitest

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

// stateMethod is the Fn API's state stream.
const stateMethod = "/org.apache.beam.model.fn_execution.v1.BeamFnState/State"

// Requests are state requests by kind.
type Requests struct {
	Gets, Appends, Clears int64
}

// Total is the number of requests.
func (r Requests) Total() int64 { return r.Gets + r.Appends + r.Clears }

var (
	mu      sync.Mutex
	byState = map[string]*Requests{}
	install sync.Once
)

// Install makes every harness of this process that dials after it count its
// state requests. It is idempotent.
func Install() {
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

// Reset forgets the requests counted so far.
func Reset() {
	mu.Lock()
	defer mu.Unlock()
	clear(byState)
}

// Of returns the requests counted on the user state called id, over every
// step that declares one.
func Of(id string) Requests {
	mu.Lock()
	defer mu.Unlock()
	if r := byState[id]; r != nil {
		return *r
	}
	return Requests{}
}

// All returns the requests counted, by user state ID ("" for requests that
// are not on user state, such as side inputs).
func All() map[string]Requests {
	mu.Lock()
	defer mu.Unlock()
	out := make(map[string]Requests, len(byState))
	for id, r := range byState {
		out[id] = *r
	}
	return out
}

func intercept(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	cs, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil || method != stateMethod {
		return cs, err
	}
	return countingStream{cs}, nil
}

// countingStream counts the state requests sent on it.
type countingStream struct{ grpc.ClientStream }

func (s countingStream) SendMsg(m any) error {
	if req, ok := m.(*fnpb.StateRequest); ok {
		count(req)
	}
	return s.ClientStream.SendMsg(m)
}

func count(req *fnpb.StateRequest) {
	id := req.GetStateKey().GetBagUserState().GetUserStateId()
	mu.Lock()
	defer mu.Unlock()
	r := byState[id]
	if r == nil {
		r = &Requests{}
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

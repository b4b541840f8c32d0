// Package localprism runs Prism's job server in this process, for jobs
// that jobrun submits on runner prism without a job server of their own:
// with LOOPBACK their SDK workers run in this process, as with
// beam.Run("prism"), but jobrun can follow and cancel them. Those workers
// are served by a worker pool that lives as long as the process (pool.go).
//
// Beam v2.77.0's Prism job server listens on every interface, where anyone
// could submit a job, and a PROCESS environment runs any command here
// (notes/beam-defects.md, "Prism's job server listens on every
// interface"): Endpoint restricts it to loopback clients
// (internal/jobrun/loopback); where it cannot (not Linux), Exposed says so.
//
// It links the Prism runner: import it from a main package or a test.
package localprism

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"

	"github.com/beamdedup/beamdedup/internal/jobrun"
	"github.com/beamdedup/beamdedup/internal/jobrun/loopback"
)

var (
	once    sync.Once
	addr    string
	err     error
	exposed error
)

// Endpoint returns the address of this process's Prism job server,
// starting it on first use, reachable from this machine only (see
// Exposed).
func Endpoint() (string, error) {
	once.Do(func() {
		l, lerr := net.Listen("tcp", "127.0.0.1:0")
		if lerr != nil {
			err = lerr
			return
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var started bool
		exposed = loopback.Listen(port, func() error {
			if _, serr := prism.CreateJobServer(ctx, prism.Options{Port: port}); serr != nil {
				return serr
			}
			started = true
			return nil
		})
		if !started {
			err, exposed = fmt.Errorf("starting Prism in process: %w", exposed), nil
			return
		}
		addr = fmt.Sprintf("localhost:%d", port)
	})
	return addr, err
}

// Exposed returns why the job server Endpoint started can be reached from
// other hosts (it listens on every interface and could not be restricted),
// or nil when it cannot be, or was not started.
func Exposed() error {
	if exposed == nil {
		return nil
	}
	return fmt.Errorf("Prism's job server in this process listens on every interface (Beam v2.77.0) and could not be restricted to this machine (%v): anyone who reaches this host can submit jobs to it", exposed)
}

// Options returns o for runner prism on this process's job server: the
// Endpoint, and the LOOPBACK environment unless o or --environment_type
// names another.
func Options(o jobrun.Options) (jobrun.Options, error) {
	ep, err := Endpoint()
	if err != nil {
		return o, err
	}
	o.Runner, o.Endpoint = "prism", ep
	if o.EnvironmentType == "" && *jobopts.EnvironmentType == "" {
		o.EnvironmentType = "LOOPBACK"
	}
	return o, nil
}

// Package localprism runs Prism's job server in this process, for jobs
// that jobrun submits on runner prism without a job server of their own.
// Jobs submitted there with the LOOPBACK environment run their SDK workers
// in this process, as beam.Run("prism") would, but their job service can
// be reached from outside beam.Run: to follow a job's metrics and to
// cancel it.
//
// It links the Prism runner: import it from a main package or a test, not
// from a library (cmd/runjob and the pipelines' tests do).
package localprism

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"

	"github.com/beamdedup/beamdedup/pipelines/jobrun"
)

var (
	once sync.Once
	addr string
	err  error
)

// Endpoint returns the address of this process's Prism job server,
// starting it on first use.
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
		if _, serr := prism.CreateJobServer(ctx, prism.Options{Port: port}); serr != nil {
			err = fmt.Errorf("starting Prism in process: %w", serr)
			return
		}
		addr = fmt.Sprintf("localhost:%d", port)
	})
	return addr, err
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

package jobrun

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"

	"github.com/beamdedup/beamdedup/internal/flinkopts"
)

// DefaultStallLimit is the stall limit of a job whose Options.StallLimit
// is 0.
const DefaultStallLimit = 60 * time.Second

// Options configure a job. The zero value of each field takes the
// default its comment gives.
type Options struct {
	// Runner is the Beam runner, as beam.Run names it (required).
	Runner string
	// Endpoint is the job server of a portable runner (prism too: see
	// internal/jobrun/localprism); empty means --endpoint.
	Endpoint string
	// EnvironmentType and EnvironmentConfig say where the SDK workers run
	// (LOOPBACK, EXTERNAL, PROCESS, DOCKER); empty means their flags.
	EnvironmentType   string
	EnvironmentConfig string
	// WorkerBinary is the SDK worker binary the runner stages (a
	// linux-amd64 build of the pipeline's main, or a test binary); empty
	// means --worker_binary, else Beam compiles the main package.
	WorkerBinary string
	// Name is the job's name on the job server, by which it is followed;
	// empty means --job_name, or else a name of this run's own.
	Name string
	// StallLimit is how long a followed job may make no progress before
	// it is cancelled: 0 means DefaultStallLimit, a negative value turns
	// the watchdog off.
	StallLimit time.Duration
	// What names the job in messages ("orders job"); default "job".
	What string
	// Progress observes the job for the watchdog, from its committed
	// metrics. Nil: any committed or attempted element count that moves is
	// progress, and nothing moving for StallLimit is a stall.
	Progress func(ctx context.Context, committed metrics.Results) (Sample, error)
	// Hint ends the stall message of a job whose workers have reported
	// (where to read about the pipeline's known stalls); empty: what to
	// check of the environment.
	Hint string
	// Timeout bounds the job from Start to its end: past it the job is
	// cancelled in the runner and Wait returns a *TimedOut. 0: no bound
	// but Start's context.
	Timeout time.Duration
	// Parallelism is the job's parallelism on a runner that takes one
	// (Flink; Beam's --parallelism); 0: --parallelism, else the runner's.
	Parallelism int
	// Flink are the job's Flink runner options, sent as Go options, which
	// the project's job server lifts into the runner's (internal/flinkopts);
	// they take precedence over the flags of the same names.
	Flink flinkopts.Options
	// FlinkREST is the REST address ("host:port") of the Flink cluster the
	// job server submits to. With runner flink the watchdog reads the job's
	// progress there (Beam's Flink runner reports metrics to the Job API
	// only when the job ends); without it, runner flink has no watchdog.
	FlinkREST string
	// BeforeSubmit is called with the pipeline before it is submitted, with
	// Beam's flags set; its error stops the job before it starts.
	BeforeSubmit func(*beam.Pipeline) error
}

// TimedOut is the error of a job that outlived Options.Timeout.
type TimedOut struct {
	What  string
	After time.Duration
}

func (e *TimedOut) Error() string {
	return fmt.Sprintf("%s did not end within %v, its timeout; cancelled in the runner", e.What, e.After)
}

// Followed reports whether runner submits to a portable job server, where
// jobs are followed (and watched) through the Job API.
func Followed(runner string) bool {
	switch strings.ToLower(runner) {
	case "prism", "prismrunner", "universal", "portable", "portablerunner", "flink", "flinkrunner", "spark", "sparkrunner":
		return true
	}
	return false
}

var jobSeq atomic.Int64

// withDefaults fills in the fields the flags or defaults give.
func (o Options) withDefaults() Options {
	endpoint, envType, envConfig, name, worker := flagDefaults()
	o.WorkerBinary = cmp.Or(o.WorkerBinary, worker)
	o.Endpoint = cmp.Or(o.Endpoint, endpoint)
	o.EnvironmentType = cmp.Or(o.EnvironmentType, envType)
	o.EnvironmentConfig = cmp.Or(o.EnvironmentConfig, envConfig)
	o.Name = cmp.Or(o.Name, name, fmt.Sprintf("beamdedup-%d-%d", time.Now().UnixNano(), jobSeq.Add(1)))
	o.StallLimit = cmp.Or(o.StallLimit, DefaultStallLimit)
	o.What = cmp.Or(o.What, "job")
	return o
}

// Loopback reports whether the SDK workers run in this process.
func (o Options) Loopback() bool {
	return strings.EqualFold(o.withDefaults().EnvironmentType, "loopback")
}

func isFlink(runner string) bool {
	r := strings.ToLower(runner)
	return r == "flink" || r == "flinkrunner"
}

package localprism_test

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	jobpb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/jobmanagement_v1"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/internal/jobrun"
	"github.com/beamdedup/beamdedup/internal/jobrun/localprism"
	"github.com/beamdedup/beamdedup/internal/jobrun/loopback"
	"github.com/beamdedup/beamdedup/testing/jobservertest"
	"github.com/beamdedup/beamdedup/testing/netnstest"
	"github.com/beamdedup/beamdedup/testing/prismtest"
)

func TestMain(m *testing.M) { prismtest.Main(m) }

var release = make(chan struct{})

// hold blocks each element until the test releases it: a job that runs
// while the test looks at the process's listeners.
func hold(x int) int {
	<-release
	return x
}

func init() { register.Function1x1(hold) }

// listening is a listener of the test's own on every interface, which
// another host reaches: the control of the tests below.
func listening(t *testing.T) int {
	l, err := net.Listen("tcp", ":0")
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

// While a job runs on the in-process job server with its SDK worker in
// this process (LOOPBACK), every listener of the process (the job
// server's Job and Fn API, the LOOPBACK worker endpoint) answers this
// machine only: a client on another host reaches none of them.
func TestEndpoint_NoListenerOfARunningJobIsReachableFromAnotherHost(t *testing.T) {
	ns := netnstest.New(t)
	control := listening(t)
	c, err := ns.DialTimeout("tcp", ns.HostAddr(control), 2*time.Second)
	require.NoError(t, err, "control: the other host reaches a listener of this one on every interface")
	c.Close()

	o, err := localprism.Options(jobrun.Options{Name: "localprism-test-listeners", StallLimit: -1})
	require.NoError(t, err)
	require.NoError(t, localprism.Exposed())
	p, s := beam.NewPipelineWithRoot()
	beam.ParDo(s, hold, beam.Create(s, 1, 2, 3))
	j, err := jobrun.Start(context.Background(), p, o)
	require.NoError(t, err)
	defer func() {
		close(release)
		_, err := j.Wait()
		assert.NoError(t, err)
	}()
	waitRunning(t, o.Endpoint, o.Name)

	ls, err := loopback.Listeners()
	require.NoError(t, err)
	_, jobPort, _ := net.SplitHostPort(o.Endpoint)
	seen := false
	for _, l := range ls {
		port := int(l.Addr.Port())
		if port == control {
			continue
		}
		if strconv.Itoa(port) == jobPort {
			seen = true
			assert.True(t, l.Restricted, "the job server's listener %v carries the loopback filter", l.Addr)
		}
		assert.False(t, l.Reachable(), "listener %v", l.Addr)
		c, err := ns.DialTimeout("tcp", ns.HostAddr(port), time.Second)
		if err == nil {
			c.Close()
		}
		assert.Error(t, err, "another host connected to listener %v", l.Addr)
	}
	assert.True(t, seen, "the job server's port %s among the listeners %v", jobPort, ls)
	assert.GreaterOrEqual(t, len(ls), 3, "the job server, the LOOPBACK worker endpoint and the control: %v", ls)
}

// Beam's own standalone Prism (cmd/prism) answers the Job API on every
// interface: a client on another host lists its jobs, and could submit
// one. prism.CreateJobServer, which runjob's in-process Prism uses, makes
// the same listener (jobservices.NewServer listens on ":port"). The day
// this fails, Beam binds loopback itself and notes/beam-defects.md's entry
// is out of date.
func TestBeamDefect_PrismJobServerListensOnEveryInterface(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts Beam's cmd/prism")
	}
	ns := netnstest.New(t)
	endpoint := jobservertest.Start(t)
	_, port, _ := net.SplitHostPort(endpoint)
	n, _ := strconv.Atoi(port)
	conn, err := ns.GRPC(ns.HostAddr(n))
	require.NoError(t, err)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = jobpb.NewJobServiceClient(conn).GetJobs(ctx, &jobpb.GetJobsRequest{})
	assert.NoError(t, err, "another host reaches Beam's Prism job server at %s", ns.HostAddr(n))
}

func waitRunning(t *testing.T, endpoint, name string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		jobs, err := jobrun.Jobs(ctx, endpoint)
		cancel()
		require.NoError(t, err)
		for _, j := range jobs {
			if j.GetJobName() == name && j.GetState() == jobpb.JobState_RUNNING {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("job %s not running within a minute", name)
}

package flinktest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamdedup/beamdedup/internal/flinkrest"
	"github.com/beamdedup/beamdedup/internal/jobrun"
)

// turn is held while this binary's cluster runs (takeTurn).
var turn *os.File

// sharedCluster starts the binary's cluster on first use, once it has its
// turn.
var sharedCluster = sync.OnceValues(func() (*Cluster, error) {
	var err error
	if turn, err = takeTurn(); err != nil {
		return nil, err
	}
	return StartCluster(ClusterConfig{})
})

// takeTurn waits until no other test binary of this machine runs its
// shared cluster: go test runs packages side by side, and two Flink
// clusters (with a broker) on a small machine starve each other's
// heartbeats and deadlines. The lock goes with the process.
func takeTurn() (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "beamdedup-flink-cluster.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// SharedCluster returns the cluster of this test binary, starting it on
// first use with the command's defaults (two TaskManagers of two slots,
// internal/flinkserver's Config) in a temporary directory, once no other
// test binary runs one; MainCluster stops it when the tests end. A test
// that cannot have it is skipped or failed (SkipOrFail).
func SharedCluster(tb testing.TB) *Cluster {
	tb.Helper()
	c, err := sharedCluster()
	if err != nil {
		SkipOrFail(tb, err)
		return nil
	}
	return c
}

// MainCluster is the TestMain of a package whose tests use SharedCluster:
// it runs the tests and stops the cluster, printing the end of its logs
// when a test failed.
func MainCluster(m *testing.M) {
	code := m.Run()
	if turn != nil { // the tests started the cluster
		if c, _ := sharedCluster(); c != nil {
			if code != 0 {
				fmt.Fprintf(os.Stderr, "flink cluster logs:\n%s\n", c.Logs(6000))
			}
			c.Stop()
		}
		turn.Close()
	}
	os.Exit(code)
}

// Start submits p with o and, when the test ends, cancels the job if it
// still runs and fails the test if the job still runs on the cluster
// after it ended for jobrun (cancelling it there): a job left running,
// its LOOPBACK workers gone with its test, restarts on and starves the
// next tests.
func Start(t testing.TB, p *beam.Pipeline, o jobrun.Options) *jobrun.Job {
	t.Helper()
	j, err := jobrun.Start(context.Background(), p, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		select {
		case <-j.Done():
		default:
			j.Cancel()
			j.Wait()
		}
		ended(t, j)
	})
	return j
}

// ended is Start's check that the job ended on the cluster too.
func ended(t testing.TB, j *jobrun.Job) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, err := j.FlinkJobID(ctx)
	if err != nil {
		return // it never reached the cluster, or is not followed there
	}
	for ctx.Err() == nil {
		fj, err := j.Flink().Job(ctx, id)
		if err == nil && flinkrest.Terminal(fj.State) {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Errorf("the Flink job %s still runs on the cluster after its end; cancelled", id)
	j.Flink().Cancel(context.Background(), id)
}

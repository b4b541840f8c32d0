package flinktest

import (
	"fmt"
	"os"
	"sync"
	"testing"
)

var sharedCluster struct {
	sync.Mutex
	c   *Cluster
	err error
}

// SharedCluster returns the cluster of this test binary, starting it on
// first use with the command's defaults (two TaskManagers of two slots,
// internal/flinkserver's Config) in a temporary directory; MainCluster
// stops it when the tests end. A test that cannot have it is skipped or
// failed (SkipOrFail).
func SharedCluster(tb testing.TB) *Cluster {
	tb.Helper()
	sharedCluster.Lock()
	defer sharedCluster.Unlock()
	if sharedCluster.c == nil && sharedCluster.err == nil {
		sharedCluster.c, sharedCluster.err = StartCluster(ClusterConfig{})
	}
	if sharedCluster.err != nil {
		SkipOrFail(tb, sharedCluster.err)
		return nil
	}
	return sharedCluster.c
}

// MainCluster is the TestMain of a package whose tests use SharedCluster:
// it runs the tests and stops the cluster, printing the end of its logs
// when a test failed.
func MainCluster(m *testing.M) {
	code := m.Run()
	sharedCluster.Lock()
	if c := sharedCluster.c; c != nil {
		if code != 0 {
			fmt.Fprintf(os.Stderr, "flink cluster logs:\n%s\n", c.Logs(6000))
		}
		c.Stop()
	}
	sharedCluster.Unlock()
	os.Exit(code)
}

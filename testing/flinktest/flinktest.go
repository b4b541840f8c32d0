// Package flinktest is the tests' Flink: one session cluster per test
// binary (SharedCluster, stopped by MainCluster), the Flink job server and
// cluster that cmd/flinkjobserver runs for a user (internal/flinkserver),
// started with its defaults in a temporary directory; and Beam's Spark
// job server for the Spark runs of docs/runners.md (Spark,
// cmd/sparkjobserver).
//
//	func TestMain(m *testing.M) { flinktest.MainCluster(m) } // stops the shared cluster at the end
//	c := flinktest.SharedCluster(t)                         // c.Endpoint, c.REST
//
// The package's own tests (go test ./testing/flinktest/) run the
// transforms' semantics beside Prism, runjob's samples and what runs on
// Flink as it runs in production (checkpoints, savepoints, a TaskManager
// killed, the job server's fixes of Beam's runner) on that cluster, with
// a splittable source of ticks (Ticks, ticks_test.go).
//
// Without java or mvn a test is skipped, unless the CI environment variable
// is set: then it fails (proctest.SkipOrFail).
package flinktest

import (
	_ "embed"
	"testing"
	"time"

	"github.com/beamdedup/beamdedup/internal/flinkserver"
	"github.com/beamdedup/beamdedup/internal/maven"
	"github.com/beamdedup/beamdedup/testing/proctest"
)

// The cluster and job server types of internal/flinkserver, which the
// tests use as the command does.
type (
	// Cluster is a Flink session cluster of its own processes and its job
	// server.
	Cluster = flinkserver.Cluster
	// ClusterConfig sizes and configures a cluster.
	ClusterConfig = flinkserver.Config
	// Process is a JVM of a cluster (JobManager, TaskManager, job server).
	Process = flinkserver.Process
)

// StartCluster starts a session cluster (flinkserver.StartCluster).
var StartCluster = flinkserver.StartCluster

//go:embed sparkjobserver/pom.xml
var sparkPom []byte

// SparkVersion is the Spark release of the Spark job server.
const SparkVersion = "3.2.2"

// Spark is Beam's Spark job server with a local Spark (two threads). Its
// Job API listens on every interface (Beam's job servers take no bind
// address: --job-host only names the host they report): use it on a
// machine whose network you trust.
var Spark = &flinkserver.JobServer{
	Project: &maven.Project{Name: "spark-" + SparkVersion + "-beam-" + flinkserver.BeamVersion, Pom: sparkPom},
	Main:    "org.apache.beam.runners.spark.SparkJobServerDriver",
	Args:    []string{"--spark-master-url=local[2]"},
	// Spark 3.2 reaches into the JDK's internals, which Java 17 closes.
	JVM: []string{"-Xmx2g",
		"--add-opens=java.base/java.lang=ALL-UNNAMED", "--add-opens=java.base/java.lang.invoke=ALL-UNNAMED",
		"--add-opens=java.base/java.nio=ALL-UNNAMED", "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
		"--add-opens=java.base/java.util=ALL-UNNAMED"},
}

// SkipOrFail ends tb for a job server or cluster that could not start: a
// skip when java or mvn is missing outside CI, else a failure.
func SkipOrFail(tb testing.TB, err error) {
	tb.Helper()
	proctest.SkipOrFail(tb, err, maven.ErrNoJava)
}

// Await polls cond every 200 ms until it holds, failing the test past
// timeout with what it was waiting for.
func Await(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("waited %v for %s", timeout, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Package flinkclustertest runs pipelines on a Flink session cluster of
// separate processes (testing/flinktest.StartCluster: a JobManager, two
// TaskManagers, Beam's job server submitting to it), once per test
// binary: what runs on Flink as it runs in production and not on the job
// server's embedded cluster (testing/flinktest): the Flink options of a
// Go job, the watchdog reading Flink's REST API, checkpoints, a
// TaskManager killed, a savepoint taken and restored. It holds tests
// only.
package flinkclustertest

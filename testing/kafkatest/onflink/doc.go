// Package onflink holds the tests of transforms/kafkaio on a Flink session
// cluster (testing/flinktest's, one per test binary) beside a Kafka broker
// (testing/kafkatest's): what kafkaio commits for a consumer group when
// Flink checkpoints, and seed 001's whole pipeline (pipelines/streaming
// over streaming.Kafka) through a savepoint and a TaskManager killed. It
// has no code of its own.
package onflink

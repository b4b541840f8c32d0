// Package iocounters is the one list of the IO packages' counters
// (transforms/kafkaio, transforms/pubsubio): their namespaces and names,
// which the packages count under and their docs list for users, and their
// sums over a job, which the samples' status and watchdogs and the tests
// read.
package iocounters

import "github.com/apache/beam/sdks/v2/go/pkg/beam"

// Kafka's counters, under KafkaNamespace.
const (
	KafkaNamespace    = "beamdedup/kafkaio"
	KafkaRead         = "records_read"          // records Read emitted
	KafkaWritten      = "records_written"       // records Write wrote and Kafka confirmed, dead letters aside
	KafkaDeadLettered = "records_dead_lettered" // dead letters (Record.DeadLetter) Write wrote and Kafka confirmed
	KafkaDropped      = "records_dropped"       // records Commit took as dropped duplicates (a KV collection)
	KafkaSafe         = "records_safe"          // records Commit marked safe for their partition's ledger
)

// Pub/Sub's counters, under PubsubNamespace.
const (
	PubsubNamespace       = "beamdedup/pubsubio"
	PubsubRead            = "messages_read"         // deliveries Read emitted
	PubsubAbsorbed        = "redeliveries_absorbed" // deliveries of a message in flight, not emitted again
	PubsubNacked          = "messages_nacked"       // pulled, not claimed, handed back
	PubsubLeaseExtensions = "lease_extensions"      // ModifyAckDeadline requests
	PubsubPublished       = "messages_published"    // published by Write
	PubsubAcked           = "messages_acked"        // acked by Ack
	PubsubAckFailed       = "acks_failed"           // refused by Pub/Sub after retries; redelivered
	PubsubAckedUnheld     = "acked_unheld"          // acked with the id they carried: not held in the acking process
)

// Pubsub are pubsubio's counters of a job, summed over its steps. Every
// delivery Read emits ends in one ack attempt (Acked or AckFailed) once
// the pipeline has made it safe, so Read == Acked + AckFailed when nothing
// is in flight.
type Pubsub struct {
	Read, Absorbed, Nacked, LeaseExtensions int64
	Published                               int64
	Acked, AckFailed, AckedUnheld           int64
}

// ReadPubsub sums pubsubio's counters from a job's metrics.
func ReadPubsub(pr beam.PipelineResult) Pubsub {
	var c Pubsub
	Sum(pr, PubsubNamespace, map[string]*int64{
		PubsubRead: &c.Read, PubsubAbsorbed: &c.Absorbed, PubsubNacked: &c.Nacked, PubsubLeaseExtensions: &c.LeaseExtensions,
		PubsubPublished: &c.Published, PubsubAcked: &c.Acked, PubsubAckFailed: &c.AckFailed, PubsubAckedUnheld: &c.AckedUnheld,
	})
	return c
}

// Sum adds to each field the committed value of the counter of its name
// in namespace, over every step; a nil result adds nothing.
func Sum(pr beam.PipelineResult, namespace string, fields map[string]*int64) {
	if pr == nil {
		return
	}
	for _, r := range pr.Metrics().AllMetrics().Counters() {
		if p := fields[r.Name()]; p != nil && r.Namespace() == namespace {
			*p += r.Result()
		}
	}
}

package pubsubio

import (
	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamdedup/beamdedup/transforms/internal/metricsum"
)

// Namespace is the metric namespace of the package's counters.
const Namespace = "beamdedup/pubsubio"

// The counters, by name.
const (
	MetricRead            = "messages_read"         // deliveries Read emitted
	MetricAbsorbed        = "redeliveries_absorbed" // deliveries of a message in flight, not emitted again
	MetricNacked          = "messages_nacked"       // pulled, not claimed, handed back
	MetricLeaseExtensions = "lease_extensions"      // ModifyAckDeadline requests
	MetricPublished       = "messages_published"    // published by Write
	MetricAcked           = "messages_acked"        // acked by Ack
	MetricAckFailed       = "acks_failed"           // refused by Pub/Sub after retries; redelivered
	MetricAckedUnheld     = "acked_unheld"          // acked with the id they carried: not held in the acking process
)

var (
	cRead            = beam.NewCounter(Namespace, MetricRead)
	cAbsorbed        = beam.NewCounter(Namespace, MetricAbsorbed)
	cNacked          = beam.NewCounter(Namespace, MetricNacked)
	cLeaseExtensions = beam.NewCounter(Namespace, MetricLeaseExtensions)
	cPublished       = beam.NewCounter(Namespace, MetricPublished)
	cAcked           = beam.NewCounter(Namespace, MetricAcked)
	cAckFailed       = beam.NewCounter(Namespace, MetricAckFailed)
	cAckedUnheld     = beam.NewCounter(Namespace, MetricAckedUnheld)
)

// Counters are the package's counters of a job, summed over its steps.
// Every delivery Read emits (Read) ends in one ack attempt (Acked or
// AckFailed) once the pipeline has made it safe, so Read == Acked +
// AckFailed when nothing is in flight.
type Counters struct {
	Read, Absorbed, Nacked, LeaseExtensions int64
	Published                               int64
	Acked, AckFailed, AckedUnheld           int64
}

// InFlight is the number of deliveries emitted and not yet acked.
func (c Counters) InFlight() int64 { return c.Read - c.Acked - c.AckFailed }

// ReadCounters sums the package's counters from a job's metrics.
func ReadCounters(pr beam.PipelineResult) Counters {
	var c Counters
	metricsum.Sum(pr, Namespace, map[string]*int64{
		MetricRead: &c.Read, MetricAbsorbed: &c.Absorbed, MetricNacked: &c.Nacked,
		MetricLeaseExtensions: &c.LeaseExtensions, MetricPublished: &c.Published,
		MetricAcked: &c.Acked, MetricAckFailed: &c.AckFailed, MetricAckedUnheld: &c.AckedUnheld,
	})
	return c
}

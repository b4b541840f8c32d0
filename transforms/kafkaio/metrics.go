package kafkaio

import (
	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamdedup/beamdedup/transforms/internal/metricsum"
)

// Namespace is the metric namespace of the package's counters.
const Namespace = "beamdedup/kafkaio"

// The counters, by name.
const (
	MetricRead    = "records_read"    // records Read emitted
	MetricWritten = "records_written" // records Write wrote and Kafka confirmed
	MetricSafe    = "records_safe"    // records Commit marked safe, in the process of their reader
	MetricUnheld  = "records_unheld"  // records Commit saw where their reader does not run: not committed from there
)

var (
	cRead    = beam.NewCounter(Namespace, MetricRead)
	cWritten = beam.NewCounter(Namespace, MetricWritten)
	cSafe    = beam.NewCounter(Namespace, MetricSafe)
	cUnheld  = beam.NewCounter(Namespace, MetricUnheld)
)

// Counters are the package's counters of a job, summed over its steps.
// Every record Read emits reaches Commit once the pipeline made it safe,
// so Read == Safe + Unheld when nothing is in flight.
type Counters struct {
	Read, Written, Safe, Unheld int64
}

// InFlight is the number of records read and not yet marked safe.
func (c Counters) InFlight() int64 { return c.Read - c.Safe - c.Unheld }

// ReadCounters sums the package's counters from a job's metrics.
func ReadCounters(pr beam.PipelineResult) Counters {
	var c Counters
	metricsum.Sum(pr, Namespace, map[string]*int64{
		MetricRead: &c.Read, MetricWritten: &c.Written, MetricSafe: &c.Safe, MetricUnheld: &c.Unheld,
	})
	return c
}

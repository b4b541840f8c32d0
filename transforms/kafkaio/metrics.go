package kafkaio

import (
	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamdedup/beamdedup/internal/iocounters"
)

var (
	cRead         = beam.NewCounter(iocounters.KafkaNamespace, iocounters.KafkaRead)
	cWritten      = beam.NewCounter(iocounters.KafkaNamespace, iocounters.KafkaWritten)
	cDeadLettered = beam.NewCounter(iocounters.KafkaNamespace, iocounters.KafkaDeadLettered)
	cDropped      = beam.NewCounter(iocounters.KafkaNamespace, iocounters.KafkaDropped)
	cSafe         = beam.NewCounter(iocounters.KafkaNamespace, iocounters.KafkaSafe)
)

// Counters are the package's counters of a job, summed over its steps.
// Once nothing is in flight, in a pipeline that writes each record once,
// Read == Written + DeadLettered + Dropped == Safe.
type Counters struct {
	Read         int64 // records Read emitted (records_read)
	Written      int64 // records Write wrote and Kafka confirmed, dead letters aside (records_written)
	DeadLettered int64 // dead letters (a dlq_reason header) Write wrote and Kafka confirmed (records_dead_lettered)
	Dropped      int64 // duplicates Commit took from a dedup step's dropped collection (records_dropped)
	Safe         int64 // records Commit marked safe in their partition's ledger (records_safe)
}

// InFlight is the number of records read and not yet marked safe.
func (c Counters) InFlight() int64 { return c.Read - c.Safe }

// ReadCounters sums the package's counters from a job's metrics (the
// result of beamx.RunWithMetrics); a nil result is all zeros.
func ReadCounters(pr beam.PipelineResult) Counters {
	var c Counters
	iocounters.Sum(pr, iocounters.KafkaNamespace, map[string]*int64{iocounters.KafkaRead: &c.Read, iocounters.KafkaWritten: &c.Written,
		iocounters.KafkaDeadLettered: &c.DeadLettered, iocounters.KafkaDropped: &c.Dropped, iocounters.KafkaSafe: &c.Safe})
	return c
}

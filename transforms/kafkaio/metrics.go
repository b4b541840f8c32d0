package kafkaio

import (
	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamdedup/beamdedup/internal/iocounters"
)

// The package's counters (the package doc lists them for users).
var (
	cRead         = beam.NewCounter(iocounters.KafkaNamespace, iocounters.KafkaRead)
	cWritten      = beam.NewCounter(iocounters.KafkaNamespace, iocounters.KafkaWritten)
	cDeadLettered = beam.NewCounter(iocounters.KafkaNamespace, iocounters.KafkaDeadLettered)
	cDropped      = beam.NewCounter(iocounters.KafkaNamespace, iocounters.KafkaDropped)
	cSafe         = beam.NewCounter(iocounters.KafkaNamespace, iocounters.KafkaSafe)
)

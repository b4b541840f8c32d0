package pubsubio

import (
	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamdedup/beamdedup/internal/iocounters"
)

var (
	cRead            = beam.NewCounter(iocounters.PubsubNamespace, iocounters.PubsubRead)
	cAbsorbed        = beam.NewCounter(iocounters.PubsubNamespace, iocounters.PubsubAbsorbed)
	cNacked          = beam.NewCounter(iocounters.PubsubNamespace, iocounters.PubsubNacked)
	cLeaseExtensions = beam.NewCounter(iocounters.PubsubNamespace, iocounters.PubsubLeaseExtensions)
	cPublished       = beam.NewCounter(iocounters.PubsubNamespace, iocounters.PubsubPublished)
	cAcked           = beam.NewCounter(iocounters.PubsubNamespace, iocounters.PubsubAcked)
	cAckFailed       = beam.NewCounter(iocounters.PubsubNamespace, iocounters.PubsubAckFailed)
	cAckedUnheld     = beam.NewCounter(iocounters.PubsubNamespace, iocounters.PubsubAckedUnheld)
)

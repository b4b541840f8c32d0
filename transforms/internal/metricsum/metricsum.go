// Package metricsum reads a transform's Beam counters from a pipeline
// result: the one way dedup, changelog and pgsink sum their metrics.
package metricsum

import "github.com/apache/beam/sdks/v2/go/pkg/beam"

// Sum adds to each field the committed values of the counter of its name
// in namespace, over every step of the run. A nil result adds nothing.
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

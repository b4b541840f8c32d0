// Package metricsum reads a transform's Beam counters from a pipeline
// result. Each instance counts in a namespace of its own,
// beamdedup/<package>[/<transform>]/<UID>: a runner's results name a step
// by an ID of its own, not by the transform's name.
package metricsum

import (
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
)

// Sum adds to each field the committed values of the counter of its name
// in namespace, over every step of the run. A nil result adds nothing.
func Sum(pr beam.PipelineResult, namespace string, fields map[string]*int64) {
	sum(pr, fields, func(ns string) bool { return ns == namespace })
}

// SumPrefix is Sum over every namespace that starts with prefix.
func SumPrefix(pr beam.PipelineResult, prefix string, fields map[string]*int64) {
	sum(pr, fields, func(ns string) bool { return strings.HasPrefix(ns, prefix) })
}

// Of sums the counters of the instance uid of a package whose instances
// count in prefix+uid, or of every instance for "".
func Of(pr beam.PipelineResult, prefix, uid string, fields map[string]*int64) {
	if uid == "" {
		SumPrefix(pr, prefix, fields)
		return
	}
	Sum(pr, prefix+uid, fields)
}

func sum(pr beam.PipelineResult, fields map[string]*int64, match func(string) bool) {
	if pr == nil {
		return
	}
	for _, r := range pr.Metrics().AllMetrics().Counters() {
		if p := fields[r.Name()]; p != nil && match(r.Namespace()) {
			*p += r.Result()
		}
	}
}

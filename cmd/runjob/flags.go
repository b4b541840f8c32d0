package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

const (
	streamingDemo = "streaming"
	streamingLive = "streaming with --subscription"
)

// The modes by what they read, from pipelineTable.
var (
	fileModes      = modesWhere(func(p pipelineRun) bool { return p.files })
	generatedModes = modesWhere(func(p pipelineRun) bool { return p.generated })
	dedupModes     = append(slices.Clone(fileModes), streamingLive, "kafka")
)

// appliesTo is the one table of which of runjob's own flags apply to which
// pipeline (mode, as mode names it). A flag not listed applies to every
// pipeline: --pipeline, --state_ttl, --graph, --timeout, --stall_limit,
// --verbose, and Beam's flags.
var appliesTo = map[string][]string{
	"input":  fileModes,
	"output": fileModes,
	"errors": fileModes,
	// The generated input: orders, order events, or the demo's stream.
	"count": generatedModes,
	"seed":  generatedModes,
	// Options of the dedup step; the demo's is fixed (keys by order_id,
	// --state_ttl only).
	"partition_by":           dedupModes,
	"event_time_ttl":         dedupModes,
	"reset_ttl_on_duplicate": dedupModes,
	"state_buckets":          dedupModes,
	"uid":                    dedupModes,
	"on_time":                append(slices.Clone(fileModes), "kafka"),
	"force_stateful":         fileModes,
	// The PostgreSQL table of the order-status sample, or of the kept
	// orders of a streaming run.
	"postgres": {"orderstatus", streamingLive, "kafka"},
	// A subscription, read until stopped.
	"subscription":      {streamingLive},
	"output_topic":      {streamingLive, "kafka"},
	"dead_letter_topic": {streamingLive, "kafka"},
	"readers":           {streamingLive},
	"pubsub_fake":       {streamingDemo},
	"ack_deadline":      {streamingLive},
	"drain_timeout":     {streamingLive, "kafka"},
	"progress":          {streamingLive, "kafka"},
	// A Kafka topic, read until stopped.
	"brokers":     {"kafka"},
	"input_topic": {"kafka"},
	"group":       {"kafka"},
	"produce":     {"kafka"},
	"idle_stop":   {"kafka"},
}

// mode is the pipeline as appliesTo names it.
func mode(o *options) string {
	if o.pipeline == "streaming" && (o.set["subscription"] || o.set["output_topic"] || o.set["dead_letter_topic"]) {
		return streamingLive
	}
	return o.pipeline
}

// flagsApply rejects a flag given for a pipeline it does not apply to,
// naming the pipelines it applies to.
func flagsApply(o *options) error {
	m := mode(o)
	for _, f := range slices.Sorted(maps.Keys(o.set)) {
		modes, ok := appliesTo[f]
		if !ok || slices.Contains(modes, m) {
			continue
		}
		var to []string
		for _, w := range modes {
			to = append(to, describeMode(w))
		}
		msg := fmt.Sprintf("--%s does not apply to %s; it applies to %s", f, describeMode(m), strings.Join(to, ", "))
		if m == streamingDemo {
			msg += " (the demo publishes its own stream to a Pub/Sub fake it starts; give --subscription, --output_topic and --dead_letter_topic to read a real one)"
		}
		return fmt.Errorf("%s", msg)
	}
	return nil
}

func describeMode(m string) string {
	switch m {
	case streamingDemo:
		return "--pipeline=streaming: the demo"
	case streamingLive:
		return "--pipeline=streaming with --subscription"
	}
	return "--pipeline=" + m
}

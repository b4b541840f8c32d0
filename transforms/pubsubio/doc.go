// Package pubsubio reads from and writes to Google Cloud Pub/Sub on every
// Beam runner.
//
// Beam Go's own io/pubsubio is executed natively by Dataflow only: Prism
// refuses its URN and Flink has no implementation. This package is a
// Go-native unbounded source (a splittable DoFn over the unary Pull,
// Acknowledge and ModifyAckDeadline calls of the v2 client) and a publishing
// sink, with ReadNative/WriteNative as the Dataflow branch. Both sources
// produce the same [Message] type, so the rest of a pipeline is one piece of
// code.
//
// # Acking
//
// A message is acknowledged only after the runner has committed the bundle
// that read it. Each bundle of the source ends with a self-checkpoint
// (sdf.ResumeProcessingIn); the residual restriction carries the ack ids of
// the messages the bundle claimed. A runner starts a residual only after it
// has committed the bundle that produced it (the residual is part of the
// bundle's result), so the resumed restriction acks those ids first and then
// pulls more. If the bundle fails, the residual never exists, the ids are
// never acked, and Pub/Sub redelivers the messages after their ack deadline.
// The design needs neither bundle finalization (broken in Beam Go 2.77 after
// the first bundle of a plan, unsupported on Flink) nor timers.
//
// While a bundle runs, a lease goroutine keeps extending the ack deadline of
// the claimed messages with ModifyAckDeadline, and a last extension when the
// bundle ends covers the gap until the residual acks them, so slow downstream
// work does not cause redeliveries.
//
// # Stopping
//
// Prism has no drain. [IdleStop] makes the source finish after a period with
// no messages (it acks what it carries first), which ends the pipeline; use it
// for demos and tests. On Flink stop with a savepoint or cancel; on Dataflow
// use ReadNative and drain.
//
// # Local Pub/Sub
//
// [Endpoint] points the source and sink at an emulator (such as pstest)
// without TLS or credentials; the v2 client also honours PUBSUB_EMULATOR_HOST.
package pubsubio

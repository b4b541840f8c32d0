// Package pubsubio reads from and writes to Google Cloud Pub/Sub on every
// Beam runner, and acknowledges a message only once what the pipeline made
// of it is safe.
//
// Beam Go's own io/pubsubio is executed natively by Dataflow only: Prism
// refuses its URN and Flink has no implementation. This package is a
// Go-native unbounded source (a splittable DoFn over the unary Pull,
// Acknowledge and ModifyAckDeadline calls of the v2 client), a publishing
// sink, and an ack step, with ReadNative/WriteNative as the Dataflow branch.
// Both sources produce the same [Message] type, so the rest of a pipeline is
// one piece of code:
//
//	msgs := pubsubio.Read(s, sub)
//	rows := beam.ParDo(s, decode, msgs)            // each row keeps its message's AckID
//	published := pubsubio.Write(s, topic, encoded) // the messages Pub/Sub confirmed
//	pubsubio.Ack(s, sub, published)                // fused after the publish
//
// # Acking
//
// Read acknowledges nothing. Each Message carries its AckID, and [Ack]
// acknowledges it where the pipeline puts it: after the publish of the
// message's row, after the publish of its dead letter, after a sink's
// write, or for a message dropped as a duplicate. Put Ack in the same fused
// stage as the step it follows (no shuffle between), so that when that
// step fails its bundle, the acks of the bundle never happen.
//
// This matters on runners that keep a pipeline's data only in memory
// between its steps (Prism): there, acking at the source's bundle commit
// loses every message whose row had not reached the sink when the process
// died. With Ack at the end, a crash at any moment leaves every message
// whose row is not safe unacked, and Pub/Sub redelivers it.
//
// Until it is acked, a message is held by the reader's process: its lease
// is extended every third of [AckDeadline] however long the rest of the
// pipeline takes, and a redelivery of it (Pub/Sub delivers at least once)
// is absorbed, not emitted again. The second matters for deduplication: a
// redelivery dropped as a duplicate of its own first delivery would be
// acked before that delivery's row is safe. Holding lives in process
// memory; Ack finds a message held in its own process (on Prism every step
// of a job runs in one SDK worker process); where it runs in another, it
// acks the id the message carries, and the message's lease is extended
// only while its source bundle runs (docs/streaming.md has what that means
// on each runner). An ack Pub/Sub refuses is logged and counted, and the
// message comes back.
//
// Bundle finalization is not used (broken in Beam Go 2.77 after the first
// bundle of a plan, unsupported on Flink), nor timers.
//
// # Stopping
//
// Prism has no drain. [IdleStop] makes the source finish after a period with
// no messages, which ends the pipeline once the rest is done; use it for
// demos and tests. On Flink stop with a savepoint or cancel; on Dataflow
// use ReadNative and drain.
//
// # Local Pub/Sub
//
// [Endpoint] points the source, sink and ack step at an emulator (such as
// pstest) without TLS or credentials; the v2 client also honours
// PUBSUB_EMULATOR_HOST.
//
// # Counters
//
// Every delivery Read emits ends in one ack attempt: messages_read =
// messages_acked + acks_failed once nothing is in flight. Under the
// namespace beamdedup/pubsubio:
//
//	messages_read          deliveries Read emitted
//	redeliveries_absorbed  deliveries of a message in flight, not emitted again
//	messages_nacked        pulled, not claimed, handed back
//	lease_extensions       ModifyAckDeadline requests
//	messages_published     published by Write
//	messages_acked         acked by Ack
//	acks_failed            refused by Pub/Sub after retries; redelivered
//	acked_unheld           acked with the id they carried: not held in the acking process
package pubsubio

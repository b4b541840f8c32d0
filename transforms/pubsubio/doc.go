// Package pubsubio reads from and writes to Google Cloud Pub/Sub on every
// Beam runner, and acknowledges a message only once what the pipeline made
// of it is safe.
//
// Beam Go's own io/pubsubio is executed natively by Dataflow only (Prism
// refuses its URN, Flink has no implementation). This package is a
// Go-native unbounded source (a splittable DoFn over the v2 client's unary
// Pull, Acknowledge and ModifyAckDeadline), a publishing sink and an ack
// step, with ReadNative/WriteNative as the Dataflow branch; both sources
// produce [Message]:
//
//	msgs := pubsubio.Read(s, sub)
//	rows := beam.ParDo(s, decode, msgs)            // each row keeps its message's AckID
//	published := pubsubio.Write(s, topic, encoded) // the messages Pub/Sub confirmed
//	pubsubio.Ack(s, sub, published)                // fused after the publish
//
// # Acking
//
// Read acknowledges nothing. [Ack] acknowledges each message where the
// pipeline puts it: after the publish of its row or its dead letter, after
// a sink's write, or for a message dropped as a duplicate. Fused with the
// step it follows, a failed bundle of that step acks nothing. On a runner
// that keeps data between steps only in memory (Prism), acking at the
// source's bundle commit would lose every message whose row had not
// reached the sink when the process died.
//
// Until it is acked, a message is held by the reader's process: its lease
// is extended every third of [AckDeadline], and a redelivery of it is
// absorbed, not emitted again (else it could be dropped as a duplicate of
// its own first delivery, and acked before that delivery's row is safe).
// Holding lives in process memory; where Ack runs in another process, it
// acks the id the message carries (docs/streaming.md has each runner). An
// ack Pub/Sub refuses is logged and counted, and the message comes back.
// Bundle finalization is not used (broken in Beam Go 2.77 after a plan's
// first bundle, unsupported on Flink).
//
// # Stopping
//
// Prism has no drain: [IdleStop] ends the source after a period with no
// messages, for demos and tests. On Flink stop with a savepoint or cancel;
// on Dataflow use ReadNative and drain.
//
// # Local Pub/Sub
//
// [Endpoint] points the source, sink and ack step at an emulator without
// TLS or credentials; the v2 client also honours PUBSUB_EMULATOR_HOST.
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

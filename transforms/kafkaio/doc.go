// Package kafkaio reads from and writes to Apache Kafka on every Beam
// runner, natively in Go (franz-go), and commits a consumer group's
// offset only once what the pipeline made of every record before it is
// safe. (Beam Go's xlang kafkaio needs an expansion service and a Java
// SDK harness.)
//
// Read is a splittable DoFn per partition whose restriction is the
// partition's offset range, Write an idempotent producer, and Commit the
// commit step:
//
//	recs := kafkaio.Read(s, brokers, "orders", kafkaio.Group("dedup"))
//	out := beam.ParDo(s, transform, recs)                  // each output keeps its record's Topic, Partition, Offset
//	written := kafkaio.Write(s, brokers, "orders_out", out) // the records Kafka confirmed
//	kafkaio.Commit(s, brokers, "dedup", written)           // every collection through which records become safe
//
// # Committing
//
// Read commits nothing. Each Record carries where it was read, and Commit
// takes, in one call, every collection through which a record becomes
// safe: Write's output, the write of the dead letters (Record.DeadLetter),
// and the duplicates a dedup step dropped (KeepFirst's Dropped, as it is).
// A partition's offset is committed only when every record before it is
// safe, so a crash loses no record: the next run reads again what was not
// safe, and at most that. Each partition's ledger is kept in the job's
// state, keyed by partition, so Commit works at any parallelism and a
// runner that checkpoints (Flink) checkpoints it with the readers'
// positions. docs/kafka.md says what is committed on each runner and when.
//
// # Exactly once
//
// Write is at least once: a restart writes again what it reads again.
// With Transactional it writes in Kafka transactions, and a consumer
// reading committed records sees each record once. On a Flink cluster
// (through the project's job server) a bundle's transaction is committed
// once a checkpoint taken after it completes, and a job restored from a
// checkpoint commits what the checkpoint holds and aborts the rest; on
// Prism a bundle's transaction is committed at its end. docs/kafka.md
// says what it costs.
//
// # Stopping
//
// Prism has no drain. IdleStop ends each partition's reader once it has
// read to the end and nothing came for a while, which ends the pipeline
// with what it read committed to the end of each partition. On Flink stop
// with a savepoint or cancel.
//
// # Counters
//
// Once nothing is in flight, in a pipeline that writes each record once,
// records_read = records_written + records_dead_lettered +
// records_dropped = records_safe. Under the namespace beamdedup/kafkaio:
//
//	records_read           records Read emitted
//	records_written        records Write wrote and Kafka confirmed, dead letters aside
//	records_dead_lettered  dead letters (a dlq_reason header) Write wrote and Kafka confirmed
//	records_dropped        duplicates Commit took from a dedup step's dropped collection
//	records_safe           records Commit marked safe in their partition's ledger
package kafkaio

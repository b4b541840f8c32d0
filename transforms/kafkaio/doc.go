// Package kafkaio reads from and writes to Apache Kafka on every Beam
// runner, natively in Go (franz-go), and commits a consumer group's
// offset only once what the pipeline made of every record before it is
// safe.
//
// Beam Go has no native Kafka IO; its xlang kafkaio runs Java's KafkaIO
// through an expansion service and a Java SDK harness. This package is a
// splittable DoFn per partition (the restriction is the partition's offset
// range, so a runner checkpoints where each partition is and can split
// it), a writing sink with an idempotent producer, and a commit step:
//
//	recs := kafkaio.Read(s, brokers, "orders", kafkaio.Group("dedup"))
//	out := beam.ParDo(s, transform, recs)                  // each output keeps its record's Topic, Partition, Offset
//	written := kafkaio.Write(s, brokers, "orders_out", out) // the records Kafka confirmed
//	kafkaio.Commit(s, brokers, "dedup", written)           // every collection through which records become safe
//
// # Committing
//
// Read commits nothing. Each Record carries where it was read (Topic,
// Partition, Offset, Skipped), and Commit takes, in one call, every
// collection through which a record becomes safe: Write's output (the
// records Kafka confirmed), the write of the dead letters (Record.DeadLetter
// adds the reason headers), and the duplicates a dedup step dropped
// (KeepFirst's Dropped, a KV collection, given as it is).
//
// A partition's offset is committed for the group only when every record
// before it is safe: one record still in flight holds back every offset
// after it. So a crash at any moment loses no record; the next run starts
// at the group's offsets and reads again what was not safe, and at most
// that. Each partition's safe offsets are kept in a ledger in the job's
// state, keyed by partition, so Commit works at any parallelism and in any
// number of worker processes, and a runner that checkpoints (Flink)
// checkpoints the ledgers with the readers' positions. An offset is
// committed as soon as a bundle's marks move it. docs/kafka.md says what
// is committed on each runner and when.
//
// # Stopping
//
// Prism has no drain. IdleStop ends each partition's reader once it has
// read to the end and nothing came for a while, which ends the pipeline
// once the rest is done; by the time it ends, what it read is committed
// for the group to the end of each partition, with nothing to close. On
// Flink stop with a savepoint or cancel.
//
// # Counters
//
// Every record Read emits is written, dead-lettered or dropped as a
// duplicate, and reaches Commit once safe: once nothing is in flight,
// records_read = records_written + records_dead_lettered +
// records_dropped = records_safe (a pipeline that writes each record
// once). Under the namespace beamdedup/kafkaio:
//
//	records_read           records Read emitted
//	records_written        records Write wrote and Kafka confirmed, dead letters aside
//	records_dead_lettered  dead letters (a dlq_reason header) Write wrote and Kafka confirmed
//	records_dropped        duplicates Commit took from a dedup step's dropped collection
//	records_safe           records Commit marked safe in their partition's ledger
//
// # Files
//
//	read.go     Read: the partitions listed once (listFn) and where each starts
//	watch.go    WatchPartitions: the partitions listed again while the job runs (watchFn)
//	reader.go   a partition's reader, the splittable DoFn (readFn), its bundle loop
//	poll.go     the reader's bundle, a concern a step: end, hold back, poll and retry, claim and emit
//	tracker.go  the restriction tracker: the partition's offset range
//	clients.go  the process's admin clients and the partitions' pooled consumers
//	inflight.go MaxInFlight: how far a reader is ahead of its group's committed offset
//	ledger.go   a partition's safe offsets, kept and committed by its keyed committer (ledgerFn)
//	commit.go   Commit: the bundles' safe marks, merged into spans, sent to their partitions' ledgers
//	write.go    Write: the idempotent producer
//	record.go   Record, to and from franz-go's
//	options.go  the options
//	control.go  the option that attaches the samples' control (internal/unbounded)
package kafkaio

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
//	kafkaio.Commit(s, "dedup", written)                    // fused after the write
//
// # Committing
//
// Read commits nothing. Each Record carries where it was read (Topic,
// Partition, Offset), and Commit marks it safe where the pipeline puts it:
// after the write of the record's output, after the write of its dead
// letter, or where a dedup step drops it as a duplicate (its key's row
// comes from another record, itself committed only once safe). Put Commit
// in the same fused stage as the step it follows (no shuffle between), so
// that when that step fails its bundle nothing of it is marked.
//
// A partition's offset is committed for the group only when every record
// before it is safe: one record still in flight holds back every offset
// after it. So a crash at any moment loses no record; the next run starts
// at the group's offsets and reads again what was not safe, and at most
// that. This matters on a runner that keeps a pipeline's data between its
// steps only in memory (Prism): there, committing when the source's bundle
// commits loses every record whose output had not been written when the
// process died.
//
// The bookkeeping lives in the reader's process. Commit marks a record
// there when it runs in the same process (on Prism every step of a job
// does); where it runs in another (several SDK workers, as on a Flink
// cluster with more than one task manager) it counts the record as unheld
// and commits nothing for it, so the group's offsets stop moving there: a
// runner that checkpoints (Flink) restores each partition's position from
// its checkpoint of the restriction, not from the group. docs/kafka.md
// says what is committed on each runner and when.
//
// # Stopping
//
// Prism has no drain. IdleStop ends each partition's reader once it has
// read to the end and nothing came for a while, which ends the pipeline
// once the rest is done; by the time it ends, what it read is committed
// for the group to the end of each partition (where Commit runs in the
// reader's process, as above). On Flink stop with a savepoint or cancel.
//
// # Counters
//
// Every record Read emits ends in Commit once the pipeline has made it
// safe: records_read = records_safe + records_unheld once nothing is in
// flight. Under the namespace beamdedup/kafkaio:
//
//	records_read     records Read emitted
//	records_written  records Write wrote and Kafka confirmed
//	records_safe     records Commit marked safe, in the process of their reader
//	records_unheld   records Commit saw where their reader does not run (not committed from there)
//
// # Files
//
//	read.go     Read: the partitions listed once (listFn) and where each starts
//	watch.go    WatchPartitions: the partitions listed again while the job runs (watchFn)
//	reader.go   a partition's reader, the splittable DoFn (readFn), its bundle loop
//	poll.go     the reader's bundle, a concern a step: end, hold back, poll and retry, claim and emit
//	tracker.go  the restriction tracker: the partition's offset range
//	clients.go  the process's admin clients and the partitions' pooled consumers
//	run.go      a Read's commit bookkeeping in a worker process: safe marks, commits, MaxInFlight
//	ledger.go   a partition's safe offsets
//	commit.go   Commit: marks records safe in their reader's run
//	write.go    Write: the idempotent producer
//	record.go   Record, to and from franz-go's
//	options.go  the options
//	control.go  the option that attaches the samples' control (internal/unbounded)
package kafkaio

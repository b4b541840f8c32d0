// Package jobrun runs a Beam pipeline as a job and follows it to its end:
// submit, follow, watchdog, cancel, drain. It is the one job sequence of
// the sample pipelines (pipelines/...) and of cmd/runjob, whatever the
// runner and wherever the SDK workers run.
//
// Submission goes through beam.Run, so the program links the runner it
// names; jobrun links none. A job on a portable job server (prism,
// universal, flink, spark) is followed through the Job API: a watchdog
// (Watch) cancels it when it stops making progress, with one line saying
// what did not happen and what to check. Other runners (Dataflow) are left
// to beam.Run.
//
// Start sets Beam's global flags (--endpoint, --environment_type, ...) for
// the submission only (flags.go), with Prism's bundle splitting off on a
// runner that may be Prism (NoSplitsExperiment). Files:
//
//	options.go  Options: a job's settings and their defaults
//	job.go      Start and the job's life: wait, cancel, drain, give up
//	flags.go    the submission's global flags, set and put back
//	sample.go   what the watchdog reads of a running job
//	watch.go    Watch: the watchdog, over samples, with a fake clock in tests
//	remote.go   Remote: a job on a portable job server (the Job API)
//	flink.go    a job on a Flink cluster (its REST API): its id, a savepoint
//	resume.go   Resume: a pipeline's newest state on a local Flink cluster
//	splits.go   Prism's split experiment
package jobrun

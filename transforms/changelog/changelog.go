// Package changelog applies a changelog downstream of deduplication.
// CountPerKey keeps a count per group from rows whose kind column
// (package rowkind: +I, -U, +U, -D) says whether each adds to its group or
// takes an earlier row back: the downstream half of keep-last
// deduplication, where a GROUP BY over dedup.KeepLast's -U/+U pairs counts
// each key once.
//
//	res := dedup.KeepLast(s, events, rowspec.PartitionBy("order_id"), rowspec.OnTime("ts"), rowspec.KindColumn("op"))
//	counts := changelog.CountPerKey(s, res.Rows, res.Spec, changelog.GroupBy("status")).Counts
//
// The files: count.go the API, options.go the options, metrics.go the
// counters, dofns.go the DoFn and element types a pipeline's proto names
// (kept here, so that a running job's state matches), and internal/count
// what the workers run.
package changelog

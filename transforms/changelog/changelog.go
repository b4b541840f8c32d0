// Package changelog applies a changelog downstream of deduplication.
// CountPerKey keeps a count per group from rows whose kind column
// (package rowkind: +I, -U, +U, -D) says whether each adds to its group or
// takes an earlier row back: the downstream half of keep-last
// deduplication, where a GROUP BY over dedup.KeepLast's -U/+U pairs counts
// each key once.
package changelog

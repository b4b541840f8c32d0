package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/pipelines/orderstatus"
	"github.com/beamdedup/beamdedup/testing/pgtest"
)

// Seed 003's shape: 622 events for 240 orders give 240 +I and 382 later
// rows, of which KeepLast emits a pair for each of the 341 status changes
// and suppresses the 41 identical resends.
func TestRunOrderStatusPrintsTheChangelogAndBothCounts(t *testing.T) {
	out := filepath.Join(t.TempDir(), "counts.jsonl")
	code, stdout, _ := runJob(t, "--pipeline=orderstatus", "--output="+out)
	require.Equal(t, 0, code)
	for _, want := range []string{
		"events in           622",
		"orders              240",
		"changelog           240 +I, 341 -U/+U pairs, 0 -D",
		"resends suppressed  41 identical to the order's last row (Flink emits a -U/+U pair for each: 382 pairs)",
		fmt.Sprintf("  %-17s %7d %7d", "total", 240, 622),
	} {
		assert.Contains(t, stdout, want)
	}
}

// --postgres writes each order's current status into a table whose count
// per status is the pipeline's, and a second run of the same input leaves
// the table as it was (the sink upserts, guarded by ts).
func TestRunOrderStatusWritesEachOrdersCurrentStatusIntoPostgres(t *testing.T) {
	dsn := pgtest.Shared(t).NewDatabase(t)
	out := filepath.Join(t.TempDir(), "counts.jsonl")
	var want map[string]int64
	for run := range 2 {
		code, stdout, _ := runJob(t, "--pipeline=orderstatus", "--output="+out, "--postgres="+dsn)
		require.Equal(t, 0, code, "run %d", run)
		assert.Contains(t, stdout, "SELECT status, count(*) ... GROUP BY status equals the count per status", "run %d", run)
		got, err := readCounts(out)
		require.NoError(t, err)
		table, err := orderstatus.TableCounts(context.Background(), dsn, orderstatus.DefaultTable)
		require.NoError(t, err)
		assert.Equal(t, got, table, "run %d: the table's count per status", run)
		assert.Equal(t, int64(240), sum(table), "one row per order")
		if run == 0 {
			want = table
		}
		assert.Equal(t, want, table, "a rerun changes nothing")
	}
}

// A wrong database name is one line that names it and says what to do;
// not pgx's error per connection attempt (TLS refused, then the server's
// answer), and not the password.
func TestRunOrderStatusSaysInOneLineThatTheDatabaseDoesNotExist(t *testing.T) {
	c := pgtest.Shared(t)
	dsn := strings.Replace(c.DSN("nope"), "sslmode=disable", "", 1) // pgx then tries TLS first
	code, stdout, stderr := runJob(t, "--pipeline=orderstatus", "--output="+filepath.Join(t.TempDir(), "o.jsonl"), "--postgres="+dsn)
	assert.Equal(t, 2, code)
	assert.Empty(t, stdout)
	assert.Equal(t, fmt.Sprintf("runjob: --postgres: the server at %s has no database \"nope\": create it (createdb nope), or name one that exists in the DSN\n", c.Addr()), stderr)
	assert.NotContains(t, stderr, c.Password)
}

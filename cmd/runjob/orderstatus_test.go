package main

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

package peers_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/pipelines/orders"
	"github.com/beamdedup/beamdedup/pipelines/orderstatus"
	"github.com/beamdedup/beamdedup/testing/flinktest"
	"github.com/beamdedup/beamdedup/testing/jobservertest"
	"github.com/beamdedup/beamdedup/testing/peers"
)

// keepLastPairs is what Flink SQL's keep-last on event time emits for
// events in arrival order: a -U/+U pair for every later row of a key
// whose ts is at least the key's latest so far (an identical resend
// included); an older row emits nothing.
func keepLastPairs(events []orderstatus.Event) int {
	latest := map[string]time.Time{}
	pairs := 0
	for _, e := range events {
		if l, ok := latest[e.OrderID]; !ok {
			latest[e.OrderID] = e.TS
		} else if !e.TS.Before(l) {
			latest[e.OrderID] = e.TS
			pairs++
		}
	}
	return pairs
}

// Seed 003's table from Flink itself: 622 events for 240 orders give 240
// +I and a -U/+U pair for every later row that is not older than its
// order's latest, 382 when all are (622 − 240). With no status event late,
// the generator still delivers one resend after its order's next status:
// 381. With the sample's 12 late events Flink drops them too: 370.
// Keep-first is insert-only: 240 +I. Our KeepLast emits 341 pairs (no
// pair for the 41 identical resends; docs/performance.md, "Against the
// peers").
func TestFlinkSQL_ReproducesSeed003sChangelog(t *testing.T) {
	cases := []struct {
		name  string
		late  int
		pairs int
	}{
		{"no late status", 0, 381},
		{"12 late", orderstatus.DefaultGen.Late, 370},
	}
	var paths []string
	for _, tc := range cases {
		cfg := orderstatus.DefaultGen
		cfg.Late = tc.late
		events, err := orderstatus.Generate(cfg)
		require.NoError(t, err)
		require.Equal(t, tc.pairs, keepLastPairs(events), "%s: the pairs Flink's rule gives these events", tc.name)
		path := filepath.Join(t.TempDir(), "events.jsonl")
		require.NoError(t, orderstatus.WriteSample(path, cfg))
		paths = append(paths, path)
	}
	// One JVM for both files.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := peers.Run(ctx, peers.FlinkSQL, peers.FlinkSQLMain, append([]string{"changelog"}, paths...)...)
	if err != nil {
		flinktest.SkipOrFail(t, err)
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			suffix := ""
			if i > 0 {
				suffix = "_" + strconv.Itoa(i+1)
			}
			first, last := res["keep_first"+suffix], res["keep_last"+suffix]
			require.NotNil(t, first, "keep_first result")
			require.NotNil(t, last, "keep_last result")
			assert.Equal(t, "240", first["+I"])
			assert.Equal(t, "0", first["-U"])
			assert.Equal(t, "0", first["+U"])
			assert.Equal(t, "240", last["+I"])
			assert.Equal(t, strconv.Itoa(tc.pairs), last["-U"])
			assert.Equal(t, strconv.Itoa(tc.pairs), last["+U"])
			assert.Equal(t, "0", last["-D"])
			assert.Contains(t, first["plan"], "keep=[FirstRow]")
			assert.Contains(t, last["plan"], "keep=[LastRow]")
		})
	}
}

// Beam Python's DeduplicatePerKey on the Prism binary we build: every
// order once, and the requests its stateful DoFn makes (a bag read for
// every row, an append and, at the event-time timer, a clear for every new
// key) as docs/performance.md reports them beside ours.
func TestBeamPython_DeduplicatePerKeyOnOurPrismKeepsEachOrderOnce(t *testing.T) {
	python := peers.PythonDefault()
	if err := exec.Command(python, "-c", "import apache_beam").Run(); err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("no apache-beam at %s (.ci/run makes the venv): %v", python, err)
		}
		t.Fatalf("no apache-beam at %s (.ci/run makes the venv): %v", python, err)
	}
	prism, err := jobservertest.Binary()
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "orders.jsonl")
	require.NoError(t, orders.WriteSample(path, 300, 1))
	rows := len(orders.Generate(300, 1))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := peers.RunPython(ctx, python, prism, path)
	require.NoError(t, err)
	p := res["beam_python"]
	require.NotNil(t, p)
	assert.Equal(t, strconv.Itoa(rows), p["rows"])
	assert.Equal(t, "300", p["emitted"])
	assert.Equal(t, strconv.Itoa(rows), p["gets"], "a read of the bag for every row")
	assert.Equal(t, "300", p["appends"], "an append for every new key")
	assert.Equal(t, "300", p["clears"], "a clear at every key's timer")
}

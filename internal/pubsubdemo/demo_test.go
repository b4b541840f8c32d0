package pubsubdemo

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/testing/prismtest"
)

func TestMain(m *testing.M) { prismtest.Main(m) } // splitting off: notes/beam-defects.md 9

// fakeBuild is the pstestserver the tests start, built once.
var fakeBuild struct {
	once sync.Once
	bin  string
	err  error
}

// fake returns the command of the Pub/Sub fake: pstestserver, built once
// per test binary (go run would link it for every run).
func fake(tb testing.TB) []string {
	tb.Helper()
	fakeBuild.once.Do(func() {
		dir, err := os.MkdirTemp("", "pstestserver")
		if err != nil {
			fakeBuild.err = err
			return
		}
		fakeBuild.bin = filepath.Join(dir, "pstestserver")
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
		defer cancel()
		if out, err := exec.CommandContext(ctx, "go", "build", "-o", fakeBuild.bin, FakeCommand[2]).CombinedOutput(); err != nil {
			fakeBuild.err = fmt.Errorf("building pstestserver: %v\n%s", err, out)
		}
	})
	require.NoError(tb, fakeBuild.err)
	return []string{fakeBuild.bin}
}

func TestDemoEmitsOneMessagePerKeyAndAcksEveryMessage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	res, err := Run(ctx, prismtest.Job(t), Config{Script: Script{Keys: 3000}, Fake: fake(t)})
	require.NoError(t, err)
	t.Log("\n" + res.String())

	assert.Equal(t, res.Keys, res.Emitted, "one output message per key")
	assert.Equal(t, res.Keys, res.OutputKeys, "every key on the output topic")
	assert.Zero(t, res.Unacked, "every input message acked")
	assert.Equal(t, res.Published, res.Acked)
	assert.Equal(t, 3, res.DeadLettered, "undecodable messages dead-lettered")
	assert.Equal(t, res.Undecodable, res.DeadLettered)
	assert.Positive(t, res.AcksLost)
	assert.GreaterOrEqual(t, res.Redelivered, res.AcksLost, "every lost ack led to a redelivery")

	// Counters add up: every decodable delivery entered KeepFirst and was
	// either emitted or dropped as a duplicate.
	c := res.Status.Dedup
	assert.Equal(t, int64(res.RowsDelivered), c.RowsIn)
	assert.Equal(t, int64(res.Keys), c.Emitted)
	assert.Equal(t, c.RowsIn, c.Emitted+c.DuplicatesDropped)
	assert.Greater(t, c.DuplicatesDropped, int64(res.Redelivered), "exact duplicates and retries dropped too")
	assert.True(t, res.OK())
}

func TestDemoWithStateTTLEndsAtTheIdleStop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	start := time.Now()
	res, err := Run(ctx, prismtest.Job(t), Config{Script: Script{Keys: 300}, StateTTL: 2 * time.Hour, Fake: fake(t)})
	require.NoError(t, err)
	assert.True(t, res.OK(), res.String())
	assert.Less(t, time.Since(start), 45*time.Second, "a 2h TTL must not keep the job alive")
}

package jobservertest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The wrapper's job is to pass Prism's quoted worker id to the boot
// loader without the quotes, and every other argument as it came.
func TestProcessWrapperStripsTheQuotesPrismPutsAroundTheWorkerID(t *testing.T) {
	dir := t.TempDir()
	argsOut := filepath.Join(dir, "args")
	boot := filepath.Join(dir, "boot")
	require.NoError(t, os.WriteFile(boot, []byte("#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done > "+argsOut+"\n"), 0o755))
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"as Prism v2.77.0 passes it", []string{"--id='job-001[go-job-1-17]_go'", "--provision_endpoint=localhost:8073"},
			[]string{"--id=job-001[go-job-1-17]_go", "--provision_endpoint=localhost:8073"}},
		{"without quotes", []string{"--id=job-002_go", "--provision_endpoint=localhost:8073"},
			[]string{"--id=job-002_go", "--provision_endpoint=localhost:8073"}},
		{"a quote inside the id", []string{"--id='a'b'", "--x= 'y'"}, []string{"--id=a'b", "--x= 'y'"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(ProcessWrapper(), tc.args...)
			cmd.Env = append(os.Environ(), "BEAM_BOOT="+boot)
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, string(out))
			got, err := os.ReadFile(argsOut)
			require.NoError(t, err)
			assert.Equal(t, tc.want, strings.Split(strings.TrimSpace(string(got)), "\n"))
		})
	}
}

// docs/workers.md shows the wrapper users copy; it must be the tested one.
func TestWorkersDocShowsTheTestedProcessWrapper(t *testing.T) {
	script, err := os.ReadFile(ProcessWrapper())
	require.NoError(t, err)
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "workers.md"))
	require.NoError(t, err)
	for _, line := range strings.Split(string(script), "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			assert.True(t, strings.Contains(string(doc), line), "docs/workers.md does not show the wrapper's line %q", line)
		}
	}
}

// Two pools on one machine, each on a port of its own: the boot loader's
// own pool would take :50000 for both.
func TestWorkerPoolsListenOnPortsOfTheirOwn(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the boot loader and the worker pool")
	}
	a, b := StartWorkerPool(t), StartWorkerPool(t)
	assert.NotEqual(t, a.Addr, b.Addr)
	assert.NotContains(t, []string{a.Addr, b.Addr}, "localhost:50000")
}

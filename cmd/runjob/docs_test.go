package main

import (
	"errors"
	"flag"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/testing/docstest"
)

// Every runjob command a reader can paste from the README or docs/ parses
// and passes runjob's checks (running them is the other tests' job).
func TestEveryRunjobCommandInTheDocsIsAccepted(t *testing.T) {
	_, cmds, err := docstest.RepoCommands()
	require.NoError(t, err)
	n := 0
	for _, c := range cmds {
		if len(c.Args) < 3 || c.Args[0] != "go" || c.Args[1] != "run" || c.Args[2] != "./cmd/runjob" {
			continue
		}
		n++
		t.Run(c.String(), func(t *testing.T) {
			for k, v := range c.Env {
				t.Setenv(k, v)
			}
			o, _, err := parseOptions(c.Args[3:])
			if errors.Is(err, flag.ErrHelp) {
				return
			}
			require.NoError(t, err)
			assert.NoError(t, checkOptions(o))
		})
	}
	assert.Greater(t, n, 5, "runjob commands found in the docs")
}

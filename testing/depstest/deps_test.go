package depstest

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Import path prefixes no library package may link.
var (
	runners = "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/"
	fakes   = []string{
		"cloud.google.com/go/pubsub/v2/pstest",
		"github.com/twmb/franz-go/pkg/kfake",
		"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/",
		"github.com/beamdedup/beamdedup/testing/",
		"testing",
	}
	docker = []string{"github.com/docker/", "github.com/moby/", "github.com/testcontainers/"}
)

func TestLibraryPackagesLinkNoRunnerTestFakeOrDockerClient(t *testing.T) {
	all := append(append([]string{runners}, fakes...), docker...)
	for _, tc := range []struct {
		name      string
		packages  []string
		forbidden []string
	}{
		{"transforms and coders", []string{"./transforms/...", "./coders/..."}, all},
		// The sample pipelines' library packages: a job runs them on any
		// runner; the programs that run them (cmd/runjob, tests) link the
		// runner, the in-process Prism (jobrun/localprism) and the Pub/Sub
		// fake (streaming/demo).
		{"pipelines", []string{"./pipelines/streaming", "./pipelines/kafka", "./pipelines/jobrun", "./pipelines/jobrun/loopback", "./pipelines/orders", "./pipelines/userevents",
			"./pipelines/cdc", "./pipelines/orderstatus", "./pipelines/jsonl"}, all},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command("go", append([]string{"list", "-deps"}, tc.packages...)...)
			cmd.Dir = filepath.Join("..", "..")
			out, err := cmd.Output()
			require.NoError(t, err, "go list -deps %s", strings.Join(tc.packages, " "))
			deps := strings.Fields(string(out))
			require.Greater(t, len(deps), 100, "go list listed the dependencies")
			for _, d := range deps {
				for _, f := range tc.forbidden {
					assert.False(t, d == f || strings.HasPrefix(d, strings.TrimSuffix(f, "/")+"/"),
						"%s links %s (%s): find the import with go list -deps -f '{{.ImportPath}}: {{.Imports}}'", tc.name, d, f)
				}
			}
		})
	}
}

// testHelpers are the packages that only tests may import: what they hold
// is for tests (a clock, counter views), and a program that imports them
// ships it.
var testHelpers = []string{"github.com/beamdedup/beamdedup/testing/deduptest"}

// No program or library package (cmd, pipelines, transforms, coders)
// imports a test helper, directly or not: a product option a test needs is
// an option of the transform's own package.
func TestNoProductPackageImportsATestHelper(t *testing.T) {
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Deps \" \"}}", "./cmd/...", "./pipelines/...", "./transforms/...", "./coders/...")
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.Output()
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.Greater(t, len(lines), 20, "go list listed the packages")
	for _, line := range lines {
		pkg, deps, _ := strings.Cut(line, " ")
		if slices.Contains(testHelpers, pkg) {
			continue
		}
		for _, h := range testHelpers {
			assert.NotContains(t, strings.Fields(deps), h, "%s links the test helper %s: use the transform's own option", pkg, h)
		}
	}
}

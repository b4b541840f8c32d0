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

const module = "github.com/beamdedup/beamdedup/"

// Import path prefixes the packages may not link, by what they are.
var (
	runners = []string{"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/"}
	fakes   = []string{
		"cloud.google.com/go/pubsub/v2/pstest",
		"github.com/twmb/franz-go/pkg/kfake",
		"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/",
		module + "testing/",
		"testing",
	}
	docker = []string{"github.com/docker/", "github.com/moby/", "github.com/testcontainers/"}
)

// The layers, top down, and what each may not link. The library and the
// samples link no runner and no Docker client (a job runs them on any
// runner, and what they link rides along in every user's workers); the
// programs and the module's internal packages (what only the programs,
// samples and tests use, and the runtimes the library shares) may link a
// runner, and with Beam's Prism its Docker client (runjob's in-process
// Prism). Nothing in a product links a test fake. There are no exceptions.
var layers = []struct {
	name      string
	packages  string
	forbidden []string
}{
	{"commands", "./cmd/...", fakes},
	{"samples", "./pipelines/...", slices.Concat(runners, fakes, docker)},
	{"library", "./transforms/...", slices.Concat(runners, fakes, docker)},
	{"coders", "./coders/...", slices.Concat(runners, fakes, docker)},
	{"internal", "./internal/...", fakes},
}

// golist runs go list in the repository's root.
func golist(t *testing.T, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.Output()
	require.NoError(t, err, "go list %s", strings.Join(args, " "))
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

func under(path string, prefixes []string) (string, bool) {
	for _, f := range prefixes {
		if path == f || strings.HasPrefix(path, strings.TrimSuffix(f, "/")+"/") {
			return f, true
		}
	}
	return "", false
}

// Each package of a layer links none of what its layer forbids, directly
// or not (go list -deps, test files left out).
func TestNoProductPackageLinksATestFakeNorWhatItsLayerMayNot(t *testing.T) {
	for _, l := range layers {
		t.Run(l.name, func(t *testing.T) {
			lines := golist(t, "-f", `{{.ImportPath}} {{join .Deps " "}}`, l.packages)
			require.NotEmpty(t, lines)
			for _, line := range lines {
				pkg, deps, _ := strings.Cut(line, " ")
				for _, d := range strings.Fields(deps) {
					if f, bad := under(d, l.forbidden); bad {
						assert.Fail(t, "a forbidden link", "%s links %s (%s): find the import with go list -deps -f '{{.ImportPath}}: {{.Imports}}'", pkg, d, f)
					}
				}
			}
		})
	}
}

// testHelpers are the packages that only tests may import: what they hold
// is for tests (a clock, counter views), and a program that imports them
// ships it.
var testHelpers = []string{module + "testing/deduptest"}

// No program, sample, library or internal package imports a test helper,
// directly or not: a product option a test needs is an option of the
// transform's own package.
func TestNoProductPackageImportsATestHelper(t *testing.T) {
	lines := golist(t, "-f", `{{.ImportPath}} {{join .Deps " "}}`, "./cmd/...", "./pipelines/...", "./transforms/...", "./coders/...", "./internal/...")
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

// No package's tests import, directly or not, a sample or a command that
// itself depends on the package: a test that runs through a sample built on
// the code under test tests the sample, and ties the layers into a loop.
func TestNoTestImportsASampleBuiltOnThePackageItTests(t *testing.T) {
	deps := map[string][]string{}
	for _, line := range golist(t, "-f", `{{.ImportPath}} {{join .Deps " "}}`, "./...") {
		pkg, ds, _ := strings.Cut(line, " ")
		deps[pkg] = strings.Fields(ds)
	}
	require.Greater(t, len(deps), 50, "go list listed the packages")
	samples := []string{module + "pipelines/", module + "cmd/"}
	for _, line := range golist(t, "-f", `{{.ImportPath}} {{join .TestImports " "}} {{join .XTestImports " "}}`, "./...") {
		fields := strings.Fields(line)
		pkg, imports := fields[0], fields[1:]
		for _, imp := range imports {
			if !strings.HasPrefix(imp, module) || imp == pkg {
				continue
			}
			for _, s := range append([]string{imp}, deps[imp]...) {
				if _, sample := under(s, samples); sample && s != pkg && slices.Contains(deps[s], pkg) {
					assert.Fail(t, "a test import loop through a sample", "the tests of %s import %s, which links %s, which depends on %s", pkg, imp, s, pkg)
				}
			}
		}
	}
}

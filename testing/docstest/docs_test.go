package docstest_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/testing/docstest"
)

func pagesAndCommands(t *testing.T) (string, []docstest.Command) {
	t.Helper()
	root, cmds, err := docstest.RepoCommands()
	require.NoError(t, err)
	return root, cmds
}

// goCommands are the `go run`, `go test` and `go build` commands.
func goCommands(cmds []docstest.Command) []docstest.Command {
	var out []docstest.Command
	for _, c := range cmds {
		if len(c.Args) > 1 && c.Args[0] == "go" && (c.Args[1] == "run" || c.Args[1] == "test" || c.Args[1] == "build") {
			out = append(out, c)
		}
	}
	return out
}

// packages returns the local package patterns of a go command (./x,
// ./x/..., ./...), and for go run only the first (the rest are the
// program's arguments).
func packages(c docstest.Command) []string {
	var pkgs []string
	for _, a := range c.Args[2:] {
		if strings.HasPrefix(a, "-") {
			continue
		}
		if strings.HasPrefix(a, "./") || a == "." {
			pkgs = append(pkgs, a)
		}
		if c.Args[1] == "run" {
			break
		}
	}
	return pkgs
}

func TestSplitUnquotesAndKeepsGroupedWords(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{`go test -run='^$' ./x/`, []string{"go", "test", "-run=^$", "./x/"}},
		{`a "b c"  d`, []string{"a", "b c", "d"}},
		{`x=''`, []string{"x="}},
	} {
		assert.Equal(t, tc.want, docstest.Split(tc.in), tc.in)
	}
}

func TestCommandsJoinContinuationsAndReadEnvironment(t *testing.T) {
	dir := t.TempDir()
	page := "```sh\nexport A=1\nB=2 go test \\\n  -run=X ./p/   # comment\ncd x && go run ./y &\n```\nnot code: go run ./z\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "p.md"), []byte(page), 0o644))
	cmds, err := docstest.Commands(dir, []string{"p.md"})
	require.NoError(t, err)
	require.Len(t, cmds, 3)
	assert.Equal(t, []string{"go", "test", "-run=X", "./p/"}, cmds[0].Args)
	assert.Equal(t, map[string]string{"A": "1", "B": "2"}, cmds[0].Env)
	assert.Equal(t, 3, cmds[0].Line)
	assert.Equal(t, []string{"cd", "x"}, cmds[1].Args)
	assert.Equal(t, []string{"go", "run", "./y"}, cmds[2].Args)
}

func TestTheDocsHaveGoCommands(t *testing.T) {
	_, cmds := pagesAndCommands(t)
	// A parser that found none would make the checks below pass vacuously.
	assert.Greater(t, len(goCommands(cmds)), 10)
}

func TestEveryGoCommandInTheDocsNamesExistingPackages(t *testing.T) {
	root, cmds := pagesAndCommands(t)
	for _, c := range goCommands(cmds) {
		for _, p := range packages(c) {
			dir := filepath.Join(root, strings.TrimSuffix(strings.TrimSuffix(p, "..."), "/"))
			assert.NotEmpty(t, goFiles(t, dir, p), "%v: package %s has no Go files", c, p)
		}
	}
}

func goFiles(t *testing.T, dir, pattern string) []string {
	t.Helper()
	if strings.HasSuffix(pattern, "...") {
		var files []string
		filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(path, ".go") {
				files = append(files, path)
			}
			return nil
		})
		return files
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	return files
}

func TestEveryTestPatternInTheDocsMatchesATest(t *testing.T) {
	root, cmds := pagesAndCommands(t)
	for _, c := range goCommands(cmds) {
		if c.Args[1] != "test" {
			continue
		}
		var funcs []string
		named := false // a package named by path, not a ... pattern
		for _, p := range packages(c) {
			if strings.HasSuffix(p, "...") {
				continue // any package may hold the test
			}
			named = true
			funcs = append(funcs, topLevelFuncs(t, filepath.Join(root, p))...)
		}
		if !named {
			// Only ... patterns: the test may be in a package not read
			// here. A named package without tests leaves funcs empty, so
			// its patterns match nothing and fail below.
			continue
		}
		for i, a := range c.Args {
			flagName, pattern, ok := testPattern(c.Args, i, a)
			if !ok || pattern == "^$" {
				continue
			}
			top := strings.SplitN(pattern, "/", 2)[0]
			re, err := regexp.Compile(top)
			if !assert.NoError(t, err, "%v: %s", c, flagName) {
				continue
			}
			prefix := map[string]string{"run": "Test", "bench": "Benchmark", "fuzz": "Fuzz"}[flagName]
			matched := 0
			for _, f := range funcs {
				if strings.HasPrefix(f, prefix) && re.MatchString(f) || flagName == "run" && strings.HasPrefix(f, "Example") && re.MatchString(f) {
					matched++
				}
			}
			assert.NotZero(t, matched, "%v: -%s=%s matches no %s function in its packages", c, flagName, pattern, prefix)
			if flagName == "fuzz" {
				assert.LessOrEqual(t, matched, 1, "%v: -fuzz must match one fuzz test, not %d", c, matched)
			}
		}
	}
}

// testPattern reads -run/-bench/-fuzz in either -x=p or -x p form.
func testPattern(args []string, i int, a string) (name, pattern string, ok bool) {
	for _, n := range []string{"run", "bench", "fuzz"} {
		for _, dash := range []string{"-", "--"} {
			if v, found := strings.CutPrefix(a, dash+n+"="); found {
				return n, v, true
			}
			if a == dash+n && i+1 < len(args) {
				return n, args[i+1], true
			}
		}
	}
	return "", "", false
}

// topLevelFuncs returns the names of the functions declared in the
// _test.go files of dir.
func topLevelFuncs(t *testing.T, dir string) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*_test.go"))
	var names []string
	for _, f := range files {
		file, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		for _, d := range file.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil {
				names = append(names, fn.Name.Name)
			}
		}
	}
	return names
}

var envRef = regexp.MustCompile(`BEAMDEDUP_[A-Z0-9_]+`)

func TestEveryBeamdedupVariableInTheDocsIsReadByTheCode(t *testing.T) {
	root, cmds := pagesAndCommands(t)
	var code strings.Builder
	filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.Contains(path, "docstest") {
			data, _ := os.ReadFile(path)
			code.Write(data)
		}
		return nil
	})
	for _, c := range cmds {
		for k := range c.Env {
			if envRef.MatchString(k) {
				assert.True(t, strings.Contains(code.String(), `"`+k+`"`), "%v: no Go file reads %s", c, k)
			}
		}
	}
}

func TestEveryLinkInTheDocsResolves(t *testing.T) {
	root, err := docstest.Root()
	require.NoError(t, err)
	pages, err := docstest.Pages(root)
	require.NoError(t, err)
	links, err := docstest.Links(root, pages)
	require.NoError(t, err)
	require.NotEmpty(t, links)
	for _, l := range links {
		if strings.Contains(l.Target, "://") || strings.HasPrefix(l.Target, "mailto:") {
			continue
		}
		path, anchor, _ := strings.Cut(l.Target, "#")
		target := filepath.Join(root, filepath.Dir(l.File), path)
		if path == "" {
			target = filepath.Join(root, l.File)
		}
		if rel, err := filepath.Rel(root, target); err != nil || strings.HasPrefix(rel, "..") {
			assert.Fail(t, "link leaves the repository", "%s:%d: link %s: a clone has nothing there", l.File, l.Line, l.Target)
			continue
		}
		_, err := os.Stat(target)
		if !assert.NoError(t, err, "%s:%d: link %s", l.File, l.Line, l.Target) || anchor == "" || !strings.HasSuffix(target, ".md") {
			continue
		}
		anchors, err := docstest.Anchors(target)
		require.NoError(t, err)
		assert.True(t, anchors[anchor], "%s:%d: link %s: no heading with anchor #%s", l.File, l.Line, l.Target, anchor)
	}
}

func TestEveryGoSnippetInTheDocsCompiles(t *testing.T) {
	root, err := docstest.Root()
	require.NoError(t, err)
	pages, err := docstest.Pages(root)
	require.NoError(t, err)
	snippets, err := docstest.Snippets(root, pages)
	require.NoError(t, err)
	// A reader that found none would make the check pass vacuously.
	require.Greater(t, len(snippets), 10)
	problems, err := docstest.CheckSnippets(root, snippets)
	require.NoError(t, err)
	for _, p := range problems {
		t.Error(p)
	}
}

// A page of broken snippets, one problem each, and the line each problem
// must be reported at.
const brokenPage = "# p\n" +
	"```go\n" + // a fragment that uses an import it does not show
	"import \"github.com/beamdedup/beamdedup/transforms/dedup\"\n" +
	"\n" +
	"out := dedup.KeepFirst(s, rows, dedup.StateTTL(5*time.Minute))\n" + // line 5
	"```\n" +
	"```go\n" +
	"first := dedup.KeepFirst(s, rows)\n" +
	"first := dedup.KeepFirst(s, rows)\n" + // line 9: no new variables
	"```\n" +
	"```go\n" +
	"w := beam.WindowInto(s, window.NewFixedWindows(time.Minute), rows)\n" + // line 12: window is not implicit
	"```\n" +
	"```go\n" +
	"package dedup // import \"github.com/beamdedup/beamdedup/transforms/dedup\"\n" +
	"\n" +
	"func KeepFirst(s beam.Scope, rows beam.PCollection, opts ...Option) Result\n" +
	"func KeepLast(s beam.Scope, rows beam.PCollection) Result\n" + // line 18: not its signature
	"func KeepEverything(s beam.Scope, rows beam.PCollection) beam.PCollection\n" + // line 19: no such function
	"```\n" +
	"```go\n" +
	"dedup.KeepFirst(s, rows,\n" +
	"    dedup.UID(\"x\")\n" + // line 23: a comma is missing
	"```\n"

func TestCheckSnippetsReportsEachBrokenSnippetAtItsPageAndLine(t *testing.T) {
	root, err := docstest.Root()
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "p.md"), []byte(brokenPage), 0o644))
	snippets, err := docstest.Snippets(dir, []string{"p.md"})
	require.NoError(t, err)
	require.Len(t, snippets, 5)
	problems, err := docstest.CheckSnippets(root, snippets)
	require.NoError(t, err)
	var got []string
	for _, p := range problems {
		got = append(got, p.Error())
	}
	for _, want := range []string{
		`p.md:5:.*undefined: time`,
		`p.md:9:.*no new variables on left side of :=`,
		`p.md:12:.*undefined: window`,
		`p.md:18:.*KeepLast: the page gives func\(s beam.Scope, rows beam.PCollection\) Result but package dedup has func\(s beam.Scope, rows beam.PCollection, opts \.\.\.Option\) Result`,
		`p.md:19:.*package dedup has no function KeepEverything`,
		`p.md:23:.*missing ','`,
	} {
		matched := false
		for _, g := range got {
			matched = matched || regexp.MustCompile(want).MatchString(g)
		}
		assert.True(t, matched, "no problem matches %s in:\n%s", want, strings.Join(got, "\n"))
	}
	assert.Len(t, got, 6, strings.Join(got, "\n"))
}

func TestCheckSnippetsAcceptsEachFormOfTheConvention(t *testing.T) {
	root, err := docstest.Root()
	require.NoError(t, err)
	page := "```go\n" + // statements, the implicit packages and the context
		"out := dedup.KeepFirst(s, rows, dedup.StateTTL(5*time.Minute))\n" +
		"```\n" +
		"```go\n" + // imports, declarations, then statements
		"import (\n\t\"reflect\"\n\n\t\"github.com/apache/beam/sdks/v2/go/pkg/beam\"\n)\n\n" +
		"type Row struct{ ID string }\n\n" +
		"func init() { beam.RegisterType(reflect.TypeFor[Row]()) }\n\n" +
		"rows := beam.Create(s, Row{ID: \"a\"})\n" +
		"```\n" +
		"```go\n" + // an excerpt with a method
		"package dedup // import \"github.com/beamdedup/beamdedup/transforms/dedup\"\n\n" +
		"func KeepFirst(s beam.Scope, rows beam.PCollection, opts ...Option) Result\n" +
		"func ReadCounters(pr beam.PipelineResult) Counters\n" +
		"func (c Counters) Pending() int64\n" +
		"```\n" +
		"```go\n" + // a whole file
		"package main\n\nfunc main() {}\n" +
		"```\n"
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "p.md"), []byte(page), 0o644))
	snippets, err := docstest.Snippets(dir, []string{"p.md"})
	require.NoError(t, err)
	require.Len(t, snippets, 4)
	problems, err := docstest.CheckSnippets(root, snippets)
	require.NoError(t, err)
	assert.Empty(t, problems)
}

package apitest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	repo  = "../.."
	guide = "docs/development.md"
	// heading opens the guide's section that lists the exported names.
	heading = "## The public API"
)

// libraries are the trees whose packages are the library (as
// testing/depstest has them), internal packages aside.
var libraries = []string{"transforms", "coders"}

// exported is what a package exports: its top-level names, and its
// exported types' exported methods as Type.Method.
type exported struct {
	names, methods []string
}

func (e exported) all() []string { return slices.Concat(e.names, e.methods) }

// exports reads every library package's exported names from its non-test
// files, by package path from the repository's root.
func exports(t *testing.T) map[string]exported {
	t.Helper()
	out := map[string]exported{}
	for _, lib := range libraries {
		err := filepath.WalkDir(filepath.Join(repo, lib), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "internal" || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			if f.Name.Name == "main" {
				return nil
			}
			rel, err := filepath.Rel(repo, filepath.Dir(path))
			if err != nil {
				return err
			}
			pkg := filepath.ToSlash(rel)
			e := out[pkg]
			e.names = append(e.names, topLevel(f)...)
			e.methods = append(e.methods, methods(f)...)
			out[pkg] = e
			return nil
		})
		require.NoError(t, err)
	}
	for pkg, e := range out {
		slices.Sort(e.names)
		slices.Sort(e.methods)
		out[pkg] = e
	}
	return out
}

func topLevel(f *ast.File) []string {
	var names []string
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil && d.Name.IsExported() {
				names = append(names, d.Name.Name)
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					if s.Name.IsExported() {
						names = append(names, s.Name.Name)
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.IsExported() {
							names = append(names, n.Name)
						}
					}
				}
			}
		}
	}
	return names
}

func methods(f *ast.File) []string {
	var names []string
	for _, decl := range f.Decls {
		d, ok := decl.(*ast.FuncDecl)
		if !ok || d.Recv == nil || !d.Name.IsExported() {
			continue
		}
		recv := d.Recv.List[0].Type
		if star, ok := recv.(*ast.StarExpr); ok {
			recv = star.X
		}
		switch r := recv.(type) {
		case *ast.IndexExpr:
			recv = r.X
		case *ast.IndexListExpr:
			recv = r.X
		}
		if id, ok := recv.(*ast.Ident); ok && id.IsExported() {
			names = append(names, id.Name+"."+d.Name.Name)
		}
	}
	return names
}

// listedRow is a row of the guide's table: | `pkg` | count | `Name`, ... |
var listedRow = regexp.MustCompile("^\\| `([^`]+)` \\| (\\d+) \\| (.*) \\|$")

// listed reads the guide's list: each package's names and the count it
// states.
func listed(t *testing.T) (map[string][]string, map[string]int) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repo, guide))
	require.NoError(t, err)
	text := string(b)
	i := strings.Index(text, "\n"+heading+"\n")
	if i < 0 {
		return nil, nil
	}
	section := text[i+len(heading)+2:]
	if j := strings.Index(section, "\n## "); j >= 0 {
		section = section[:j]
	}
	names, counts := map[string][]string{}, map[string]int{}
	for _, line := range strings.Split(section, "\n") {
		m := listedRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		n, err := strconv.Atoi(m[2])
		require.NoError(t, err)
		counts[m[1]] = n
		var ns []string
		for _, cell := range strings.Split(m[3], ", ") {
			ns = append(ns, strings.Trim(cell, "`"))
		}
		if m[3] == "none" {
			ns = nil
		}
		names[m[1]] = ns
	}
	return names, counts
}

// table is the guide's list as the code has it now.
func table(ex map[string]exported) string {
	var pkgs []string
	for p := range ex {
		pkgs = append(pkgs, p)
	}
	slices.Sort(pkgs)
	var b strings.Builder
	b.WriteString("| package | names | exported (methods as Type.Method) |\n| --- | ---: | --- |\n")
	total := 0
	for _, p := range pkgs {
		all := ex[p].all()
		total += len(all)
		cells := "none"
		if len(all) > 0 {
			cells = "`" + strings.Join(all, "`, `") + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %d | %s |\n", p, len(all), cells)
	}
	fmt.Fprintf(&b, "\n%d names in all.\n", total)
	return b.String()
}

// Every exported name of a library package, and every exported method of
// its exported types, is listed under its package in the development
// guide, with the package's count; the list names nothing that is not
// exported. A new name fails this test until it is listed: it is then a
// name users are meant to call or read.
func TestEveryExportedNameIsListedInTheDevelopmentGuide(t *testing.T) {
	ex := exports(t)
	names, counts := listed(t)
	if len(names) == 0 {
		t.Fatalf("%s lists no package under %q; the list as the code has it now:\n\n%s", guide, heading, table(ex))
	}
	ok := true
	for pkg, e := range ex {
		got := e.all()
		want, isListed := names[pkg]
		if !assert.True(t, isListed, "%s is not listed in %s", pkg, guide) {
			ok = false
			continue
		}
		for _, n := range got {
			if !slices.Contains(want, n) {
				ok = assert.Fail(t, "an exported name not listed", "%s.%s is exported and not listed in %s: list it if users call or read it, else move it to an internal package", pkg, n, guide) && ok
			}
		}
		for _, n := range want {
			if !slices.Contains(got, n) {
				ok = assert.Fail(t, "a listed name not exported", "%s lists %s.%s, which the package does not export", guide, pkg, n) && ok
			}
		}
		ok = assert.Equal(t, len(got), counts[pkg], "%s: the count %s states", pkg, guide) && ok
	}
	for pkg := range names {
		ok = assert.Contains(t, ex, pkg, "%s lists %s, which is not a library package", guide, pkg) && ok
	}
	if !ok {
		t.Logf("the list as the code has it now:\n\n%s", table(ex))
	}
}

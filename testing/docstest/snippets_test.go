package docstest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/scanner"
	"go/token"
	"go/types"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Snippet is one ```go block of a page.
type Snippet struct {
	File string // relative to the pages' root
	Line int    // 1-based line of the block's first line of code
	Code string
}

// Snippets returns the ```go blocks of the pages (relative to root).
func Snippets(root string, pages []string) ([]Snippet, error) {
	var out []Snippet
	for _, page := range pages {
		data, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			return nil, err
		}
		var (
			cur     *Snippet
			inBlock bool
		)
		for i, line := range strings.Split(string(data), "\n") {
			info, ok := fence(line)
			if !ok {
				if cur != nil {
					cur.Code += line + "\n"
				}
				continue
			}
			if inBlock {
				if cur != nil {
					out = append(out, *cur)
				}
				cur, inBlock = nil, false
				continue
			}
			inBlock = true
			if words := strings.Fields(info); len(words) > 0 && words[0] == "go" {
				cur = &Snippet{File: page, Line: i + 2}
			}
		}
		if cur != nil {
			return nil, fmt.Errorf("%s:%d: the ```go block is not closed", page, cur.Line-1)
		}
	}
	return out, nil
}

// Context is what a fragment may use without declaring it: the names an
// earlier sentence of the page introduced (docs/development.md, "Go
// snippets").
const Context = `
var (
	s                                       beam.Scope        // the scope the snippet builds in
	rows, events, changes, trades, kvs, out beam.PCollection  // the PCollections the text names
	opts                                    []dedup.Option    // "opts..." in an API block
	dsn                                     string            // a PostgreSQL connection string
	ctx                                     context.Context
)
`

// contextImports are the packages Context names.
var contextImports = []string{"beam", "dedup", "context"}

// standardNames are the standard packages a fragment without imports may
// use by name.
var standardNames = []string{"context", "errors", "fmt", "log", "os", "reflect", "strings", "time"}

const beamPath = "github.com/apache/beam/sdks/v2/go/pkg/beam"

// implicitImports maps the package names a fragment without imports may
// use to their paths: beam, every package directly under the module's
// transforms/ (internal excepted), and standardNames.
func implicitImports(module string) (map[string]string, error) {
	modPath, err := modulePath(module)
	if err != nil {
		return nil, err
	}
	m := map[string]string{"beam": beamPath}
	for _, n := range standardNames {
		m[n] = n
	}
	dirs, err := filepath.Glob(filepath.Join(module, "transforms", "*"))
	if err != nil {
		return nil, err
	}
	for _, d := range dirs {
		name := filepath.Base(d)
		if gofiles, _ := filepath.Glob(filepath.Join(d, "*.go")); name != "internal" && len(gofiles) > 0 {
			m[name] = modPath + "/transforms/" + name
		}
	}
	return m, nil
}

func modulePath(module string) (string, error) {
	data, err := os.ReadFile(filepath.Join(module, "go.mod"))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if p, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.TrimSpace(p), nil
		}
	}
	return "", fmt.Errorf("%s/go.mod names no module", module)
}

// CheckSnippets type-checks the snippets against the packages of the
// module in the directory module (and what it requires). Each returned
// error is one problem, positioned at its page and line
// ("docs/keepfirst.md:42: undefined: time"); the error is a failure to
// run the check itself. The forms of a snippet and what a fragment may
// use without declaring it are docs/development.md's "Go snippets".
func CheckSnippets(module string, snippets []Snippet) ([]error, error) {
	implicit, err := implicitImports(module)
	if err != nil {
		return nil, err
	}
	var (
		problems []error
		units    []unit
		pages    = map[string]int{} // page → index in units of its package
	)
	for _, sn := range snippets {
		kind, err := classify(sn)
		if err != nil {
			problems = append(problems, err)
			continue
		}
		switch kind.form {
		case formFile:
			units = append(units, unit{name: sn.File, files: []genFile{{name: generated, src: lineDirective(sn.File, sn.Line) + sn.Code}}})
		case formExcerpt:
			f, ex, err := excerptFile(sn, kind, implicit)
			if err != nil {
				problems = append(problems, err)
				continue
			}
			units = append(units, unit{name: sn.File, files: []genFile{f}, excerpt: ex})
		case formFragment:
			f, err := fragmentFile(sn, implicit)
			if err != nil {
				problems = append(problems, err)
				continue
			}
			i, ok := pages[sn.File]
			if !ok {
				i = len(units)
				pages[sn.File] = i
				units = append(units, unit{name: sn.File, files: []genFile{contextFile(implicit)}, fragments: true})
			}
			units[i].files = append(units[i].files, f)
		}
	}
	imp, err := newImporter(module, units)
	if err != nil {
		return nil, err
	}
	for _, u := range units {
		problems = append(problems, u.check(imp)...)
	}
	sort.SliceStable(problems, func(i, j int) bool {
		fi, li := position(problems[i])
		fj, lj := position(problems[j])
		return fi < fj || fi == fj && li < lj
	})
	return problems, nil
}

var positionRE = regexp.MustCompile(`^([^:]*):(\d+)`)

// position is the page and line an error starts with.
func position(err error) (string, int) {
	m := positionRE.FindStringSubmatch(err.Error())
	if m == nil {
		return "", 0
	}
	line, _ := strconv.Atoi(m[2])
	return m[1], line
}

type form int

const (
	formFragment form = iota // statements, optionally after imports and declarations
	formFile                 // a whole file: it starts with its package clause
	formExcerpt              // declarations of a package as go doc prints them
)

type kind struct {
	form       form
	pkg, path  string // an excerpt's package name and import path
	headerLine int    // an excerpt's package clause, relative to the snippet
}

// excerptHeader is go doc's first line: package dedup // import "path".
var excerptHeader = regexp.MustCompile(`^package\s+(\w+)\s*//\s*import\s+"([^"]+)"\s*$`)

func classify(sn Snippet) (kind, error) {
	for i, line := range strings.Split(sn.Code, "\n") {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "//") {
			continue
		}
		if m := excerptHeader.FindStringSubmatch(t); m != nil {
			return kind{form: formExcerpt, pkg: m[1], path: m[2], headerLine: i}, nil
		}
		if strings.HasPrefix(t, "package ") {
			return kind{form: formFile}, nil
		}
		break
	}
	return kind{form: formFragment}, nil
}

type genFile struct{ name, src string }

type unit struct {
	name      string
	files     []genFile
	fragments bool     // a page's fragments: a local declared and not used is no problem
	excerpt   *excerpt // compare its declarations with the package's
}

// generated names the generated parts of a file; errors there are the
// checker's, not the page's.
const generated = "docstest-generated.go"

func lineDirective(file string, line int) string {
	return fmt.Sprintf("//line %s:%d\n", file, line)
}

func contextFile(implicit map[string]string) genFile {
	var b strings.Builder
	b.WriteString("package snippets\n\nimport (\n")
	for _, n := range contextImports {
		fmt.Fprintf(&b, "\t%s %q\n", n, implicit[n])
	}
	b.WriteString(")\n" + Context)
	return genFile{name: generated, src: b.String()}
}

// fragmentFile makes a file of a fragment: its leading imports and
// declarations at the top level, the rest in the body of a function.
func fragmentFile(sn Snippet, implicit map[string]string) (genFile, error) {
	lines := strings.SplitAfter(sn.Code, "\n")
	// The split is the last line where the head parses as a file's
	// declarations and the rest as statements; else, to report the
	// error, where the head parses.
	split, fallback := -1, 0
	for k := len(lines); k >= 0; k-- {
		if !parses("package p\n" + strings.Join(lines[:k], "")) {
			continue
		}
		if fallback == 0 {
			fallback = k
		}
		if parses("package p\nfunc _() {\n" + strings.Join(lines[k:], "") + "\n}\n") {
			split = k
			break
		}
	}
	if split < 0 {
		split = fallback
	}
	decls, stmts := strings.Join(lines[:split], ""), strings.Join(lines[split:], "")
	var b strings.Builder
	b.WriteString("//line " + generated + ":1\npackage snippets\n")
	if !hasImports(decls) {
		for _, name := range usedPackages(sn.Code, implicit) {
			fmt.Fprintf(&b, "import %s %q\n", name, implicit[name])
		}
	}
	b.WriteString(lineDirective(sn.File, sn.Line) + decls)
	b.WriteString("\nfunc _() {\n" + lineDirective(sn.File, sn.Line+split) + stmts + "\n}\n")
	return genFile{name: generated, src: b.String()}, nil
}

func parses(src string) bool {
	_, err := parser.ParseFile(token.NewFileSet(), "", src, parser.SkipObjectResolution)
	return err == nil
}

func hasImports(decls string) bool {
	f, err := parser.ParseFile(token.NewFileSet(), "", "package p\n"+decls, parser.ImportsOnly)
	return err == nil && len(f.Imports) > 0
}

// usedPackages are the implicit package names the code selects from
// (time.Minute), sorted.
func usedPackages(code string, implicit map[string]string) []string {
	var sc scanner.Scanner
	fset := token.NewFileSet()
	src := []byte(code)
	sc.Init(fset.AddFile("", -1, len(src)), src, nil, 0)
	seen := map[string]bool{}
	// A package is the identifier before a period that does not itself
	// follow a period (x.time.Minute is a field).
	var before, last token.Token
	var lastLit string
	for {
		_, tok, lit := sc.Scan()
		if tok == token.EOF {
			break
		}
		if tok == token.PERIOD && last == token.IDENT && before != token.PERIOD {
			if _, ok := implicit[lastLit]; ok {
				seen[lastLit] = true
			}
		}
		before, last, lastLit = last, tok, lit
	}
	return slices.Sorted(maps.Keys(seen))
}

// excerpt is an API excerpt: its package and, in order, the functions
// it declares.
type excerpt struct {
	pkg, path string
	header    string // the package clause's page and line
	funcs     []excerptFunc
}

type excerptFunc struct {
	name    string
	recv    string // a method's receiver type name, else ""
	pointer bool   // a method on *recv
}

// excerptFile makes a file that declares, for each function of an
// excerpt, a variable of the type the page gives it (a method's receiver
// first), so that check can compare it with the package's.
func excerptFile(sn Snippet, k kind, implicit map[string]string) (genFile, *excerpt, error) {
	fset := token.NewFileSet()
	code := lineDirective(sn.File, sn.Line) + sn.Code
	f, err := parser.ParseFile(fset, generated, code, parser.SkipObjectResolution)
	if err != nil {
		return genFile{}, nil, err
	}
	text := func(from, to token.Pos) string {
		return code[fset.Position(from).Offset:fset.Position(to).Offset]
	}
	ex := &excerpt{pkg: k.pkg, path: k.path, header: fmt.Sprintf("%s:%d", sn.File, sn.Line+k.headerLine)}
	var b strings.Builder
	b.WriteString("//line " + generated + ":1\npackage excerpt\n")
	fmt.Fprintf(&b, "import . %q\n", k.path)
	for _, name := range usedPackages(sn.Code, implicit) {
		if name != k.pkg {
			fmt.Fprintf(&b, "import %s %q\n", name, implicit[name])
		}
	}
	for _, d := range f.Decls {
		pos := fset.Position(d.Pos())
		fd, ok := d.(*ast.FuncDecl)
		switch {
		case !ok:
			return genFile{}, nil, fmt.Errorf("%s: an API excerpt holds func declarations only", pos)
		case fd.Body != nil:
			return genFile{}, nil, fmt.Errorf("%s: %s: an API excerpt declares a function without its body, as go doc prints it", pos, fd.Name.Name)
		case fd.Type.TypeParams != nil:
			return genFile{}, nil, fmt.Errorf("%s: %s: generic functions in an API excerpt are not checked yet", pos, fd.Name.Name)
		}
		fn := excerptFunc{name: fd.Name.Name}
		params, results := fd.Type.Params, text(fd.Type.Params.Closing+1, fd.Type.End())
		sig := "func" + text(params.Opening, params.Closing+1) + results
		if fd.Recv != nil {
			rt := fd.Recv.List[0].Type
			if star, ok := rt.(*ast.StarExpr); ok {
				fn.pointer, rt = true, star.X
			}
			id, ok := rt.(*ast.Ident)
			if !ok {
				return genFile{}, nil, fmt.Errorf("%s: %s: an API excerpt's receiver is a type of the package", pos, fd.Name.Name)
			}
			fn.recv = id.Name
			recv := text(fd.Recv.List[0].Type.Pos(), fd.Recv.List[0].Type.End())
			if len(params.List) > 0 && len(params.List[0].Names) > 0 {
				recv = "_ " + recv
			}
			if len(params.List) > 0 {
				recv += ", "
			}
			sig = "func(" + recv + text(params.Opening+1, params.Closing) + ")" + results
		}
		ex.funcs = append(ex.funcs, fn)
		b.WriteString(lineDirective(sn.File, pos.Line))
		fmt.Fprintf(&b, "var _ %s\n", sig)
	}
	return genFile{name: generated, src: b.String()}, ex, nil
}

func (u unit) check(imp types.Importer) []error {
	fset := token.NewFileSet()
	var (
		files    []*ast.File
		problems []error
	)
	for _, g := range u.files {
		f, err := parser.ParseFile(fset, g.name, g.src, parser.ParseComments)
		if err != nil {
			// The first error only: the rest follow from it. The other
			// snippets of the page are still checked.
			var list scanner.ErrorList
			if errors.As(err, &list) && len(list) > 0 {
				err = list[0]
			}
			problems = append(problems, err)
			continue
		}
		files = append(files, f)
	}
	if len(files) < len(u.files) && u.excerpt != nil {
		return problems
	}
	info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}}
	conf := types.Config{
		Importer: imp,
		Error: func(err error) {
			var te types.Error
			if errors.As(err, &te) {
				if u.fragments && strings.HasPrefix(te.Msg, "declared and not used") {
					return // a snippet shows a value made, not its use
				}
				if te.Fset.Position(te.Pos).Filename == generated && strings.Contains(te.Msg, "imported and not used") {
					return
				}
			}
			problems = append(problems, err)
		},
	}
	pkg, _ := conf.Check("snippets", fset, files, info)
	if u.excerpt != nil && len(problems) == 0 {
		problems = u.excerpt.compare(fset, files, info, pkg)
	}
	return problems
}

// compare checks the type the page gives each function of the excerpt
// (the variables of excerptFile, in order) against the package's.
func (ex *excerpt) compare(fset *token.FileSet, files []*ast.File, info *types.Info, pkg *types.Package) []error {
	var real *types.Package
	for _, p := range pkg.Imports() {
		if p.Path() == ex.path {
			real = p
		}
	}
	if real.Name() != ex.pkg {
		return []error{fmt.Errorf("%s: the excerpt says package %s, but %s is package %s", ex.header, ex.pkg, ex.path, real.Name())}
	}
	qual := func(p *types.Package) string {
		if p == real {
			return ""
		}
		return p.Name()
	}
	var (
		problems []error
		i        int
	)
	for _, f := range files {
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			spec := gd.Specs[0].(*ast.ValueSpec)
			fn := ex.funcs[i]
			i++
			pos := fset.Position(spec.Pos())
			want, err := ex.target(real, fn)
			if err != nil {
				problems = append(problems, fmt.Errorf("%s: %v", pos, err))
				continue
			}
			if page := info.TypeOf(spec.Type); !types.Identical(page, want) {
				problems = append(problems, fmt.Errorf("%s: %s: the page gives %s but package %s has %s",
					pos, fn, types.TypeString(page, qual), ex.pkg, types.TypeString(want, qual)))
			}
		}
	}
	return problems
}

func (fn excerptFunc) String() string {
	switch {
	case fn.recv == "":
		return fn.name
	case fn.pointer:
		return "(*" + fn.recv + ")." + fn.name
	}
	return fn.recv + "." + fn.name
}

// target is the package's type of fn: a function's signature, or a
// method's with its receiver as the first parameter.
func (ex *excerpt) target(real *types.Package, fn excerptFunc) (types.Type, error) {
	if fn.recv == "" {
		f, ok := real.Scope().Lookup(fn.name).(*types.Func)
		if !ok {
			return nil, fmt.Errorf("package %s has no function %s", ex.pkg, fn.name)
		}
		return f.Type(), nil
	}
	tn, ok := real.Scope().Lookup(fn.recv).(*types.TypeName)
	if !ok {
		return nil, fmt.Errorf("package %s has no type %s", ex.pkg, fn.recv)
	}
	var recv types.Type = tn.Type()
	if fn.pointer {
		recv = types.NewPointer(recv)
	}
	obj, _, _ := types.LookupFieldOrMethod(recv, false, real, fn.name)
	m, ok := obj.(*types.Func)
	if !ok {
		return nil, fmt.Errorf("package %s: %s has no method %s", ex.pkg, recv, fn.name)
	}
	sig := m.Type().(*types.Signature)
	params := []*types.Var{types.NewParam(token.NoPos, real, "", recv)}
	for v := range sig.Params().Variables() {
		params = append(params, v)
	}
	return types.NewSignatureType(nil, nil, nil, types.NewTuple(params...), sig.Results(), sig.Variadic()), nil
}

// newImporter reads the export data of every package the units import,
// built by the go command in the module.
func newImporter(module string, units []unit) (types.Importer, error) {
	paths := map[string]bool{}
	for _, u := range units {
		for _, g := range u.files {
			f, err := parser.ParseFile(token.NewFileSet(), g.name, g.src, parser.ImportsOnly)
			if err != nil {
				continue
			}
			for _, is := range f.Imports {
				paths[strings.Trim(is.Path.Value, `"`)] = true
			}
		}
	}
	args := []string{"list", "-e", "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}"}
	for p := range paths {
		args = append(args, p)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = module
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go list -export: %v\n%s", err, stderr.String())
	}
	export := map[string]string{}
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		if p, f, ok := strings.Cut(sc.Text(), "\t"); ok && f != "" {
			export[p] = f
		}
	}
	return importer.ForCompiler(token.NewFileSet(), "gc", func(path string) (io.ReadCloser, error) {
		f, ok := export[path]
		if !ok {
			return nil, fmt.Errorf("the go command found no package %s in module %s", path, module)
		}
		return os.Open(f)
	}), nil
}

// Package docstest reads the shell commands of the project's Markdown
// pages, so that tests can check that every command a reader pastes still
// names packages, tests, flags and files that exist. Its own tests also
// check the pages' links and that every Go snippet compiles against the
// module's packages.
package docstest

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Command is one command of a fenced code block: its environment
// assignments (VAR=value before the command, or an earlier export in the
// same block) and its arguments, shell quotes removed.
type Command struct {
	File string // relative to the repository root
	Line int    // 1-based line where the command starts
	Env  map[string]string
	Args []string
}

func (c Command) String() string {
	return fmt.Sprintf("%s:%d: %s", c.File, c.Line, strings.Join(c.Args, " "))
}

// Root is the repository root: the nearest directory above the working
// directory with a go.mod.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = up
	}
}

// Pages are the Markdown pages a reader is pointed to: README.md,
// CHANGELOG.md and CONTRIBUTING.md where present, and docs/*.md, relative
// to root.
func Pages(root string) ([]string, error) {
	pages := []string{"README.md"}
	for _, p := range []string{"CHANGELOG.md", "CONTRIBUTING.md"} {
		if _, err := os.Stat(filepath.Join(root, p)); err == nil {
			pages = append(pages, p)
		}
	}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	for _, d := range docs {
		rel, _ := filepath.Rel(root, d)
		pages = append(pages, filepath.ToSlash(rel))
	}
	return pages, nil
}

// Commands returns the commands in the fenced code blocks of the pages
// (relative to root). Output lines shown in a block are returned too; the
// caller picks the commands it checks by their first arguments.
func Commands(root string, pages []string) ([]Command, error) {
	var out []Command
	for _, page := range pages {
		cmds, err := pageCommands(root, page)
		if err != nil {
			return nil, err
		}
		out = append(out, cmds...)
	}
	return out, nil
}

func pageCommands(root, page string) ([]Command, error) {
	f, err := os.Open(filepath.Join(root, page))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var (
		out     []Command
		inBlock bool
		exports map[string]string
		pending string // a command continued with a trailing backslash
		start   int
	)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if _, ok := fence(line); ok {
			inBlock, exports, pending = !inBlock, map[string]string{}, ""
			continue
		}
		if !inBlock {
			continue
		}
		if pending == "" {
			start = n
		}
		text := pending + stripComment(line)
		if t := strings.TrimRight(text, " \t"); strings.HasSuffix(t, `\`) {
			pending = strings.TrimSuffix(t, `\`) + " "
			continue
		}
		pending = ""
		for _, part := range splitList(text) {
			words := Split(part)
			if len(words) == 0 {
				continue
			}
			if words[0] == "export" {
				for _, w := range words[1:] {
					if k, v, ok := strings.Cut(w, "="); ok {
						exports[k] = v
					}
				}
				continue
			}
			env := map[string]string{}
			for k, v := range exports {
				env[k] = v
			}
			for len(words) > 0 && assignment.MatchString(words[0]) {
				k, v, _ := strings.Cut(words[0], "=")
				env[k] = v
				words = words[1:]
			}
			if len(words) > 0 {
				out = append(out, Command{File: page, Line: start, Env: env, Args: words})
			}
		}
	}
	return out, sc.Err()
}

// fence reports whether line opens or closes a fenced code block, and
// returns what follows its backquotes (a block's info string).
func fence(line string) (info string, ok bool) {
	return strings.CutPrefix(strings.TrimSpace(line), "```")
}

var assignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// stripComment removes a # comment that starts a word outside quotes.
func stripComment(line string) string {
	var quote rune
	prev := ' '
	for i, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '#' && (prev == ' ' || prev == '\t'):
			return line[:i]
		}
		prev = r
	}
	return line
}

// splitList splits a command line at &&, ||, ; and a trailing &, outside
// quotes.
func splitList(line string) []string {
	var (
		parts []string
		quote rune
		cur   strings.Builder
	)
	rs := []rune(line)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == ';', r == '&', r == '|':
			if i+1 < len(rs) && rs[i+1] == r {
				i++
			}
			parts = append(parts, cur.String())
			cur.Reset()
			continue
		}
		cur.WriteRune(r)
	}
	return append(parts, cur.String())
}

// Split splits a command into words as a POSIX shell would for simple
// words: whitespace separates, single and double quotes group and are
// removed.
func Split(s string) []string {
	var (
		words []string
		cur   strings.Builder
		quote rune
		word  bool
	)
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, word = r, true
		case r == ' ' || r == '\t':
			if word {
				words = append(words, cur.String())
				cur.Reset()
				word = false
			}
		default:
			cur.WriteRune(r)
			word = true
		}
	}
	if word {
		words = append(words, cur.String())
	}
	return words
}

// RepoCommands returns the repository root (above the working directory)
// and the commands of its pages (Pages).
func RepoCommands() (string, []Command, error) {
	root, err := Root()
	if err != nil {
		return "", nil, err
	}
	pages, err := Pages(root)
	if err != nil {
		return "", nil, err
	}
	cmds, err := Commands(root, pages)
	return root, cmds, err
}

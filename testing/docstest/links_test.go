package docstest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

// Link is a Markdown link [text](target) of a page.
type Link struct {
	File, Target string
	Line         int
}

var linkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// Links returns the links of the pages outside code blocks and code spans.
func Links(root string, pages []string) ([]Link, error) {
	var out []Link
	for _, page := range pages {
		data, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			return nil, err
		}
		inBlock := false
		for i, line := range strings.Split(string(data), "\n") {
			if _, ok := fence(line); ok {
				inBlock = !inBlock
				continue
			}
			if inBlock {
				continue
			}
			for _, m := range linkRE.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
				out = append(out, Link{File: page, Target: m[1], Line: i + 1})
			}
		}
	}
	return out, nil
}

var codeSpan = regexp.MustCompile("`[^`]*`")

// Anchors returns the GitHub heading anchors of a Markdown page.
func Anchors(path string) (map[string]bool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	anchors := map[string]bool{}
	inBlock := false
	for _, line := range strings.Split(string(data), "\n") {
		if _, ok := fence(line); ok {
			inBlock = !inBlock
			continue
		}
		if inBlock || !strings.HasPrefix(line, "#") {
			continue
		}
		anchors[Slug(strings.TrimLeft(line, "# "))] = true
	}
	return anchors, nil
}

// Slug is GitHub's anchor for a heading: lower case, spaces to hyphens,
// punctuation other than hyphens and underscores removed.
func Slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

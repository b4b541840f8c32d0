// Package maven runs Java from Maven Central on this machine (Project):
// the Flink job server (internal/flinkserver), the tests' Kafka broker and
// the benchmarks' JVM peers.
package maven

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// ErrNoJava reports that java or mvn is missing.
var ErrNoJava = errors.New("java or mvn not found")

// ResolveTimeout bounds resolving a project's classpath (a fresh machine
// downloads about 230 MB from Maven Central for the Flink job server).
var ResolveTimeout = 30 * time.Minute

// Project is a Maven project whose dependencies' classpath is resolved
// with mvn once per machine and cached under the user cache directory,
// keyed by its pom; its Java sources, if any, are compiled against it with
// javac once per version of them.
type Project struct {
	// Name names it in messages and in its cache directory.
	Name string
	// Pom is its pom.xml.
	Pom []byte
	// Sources holds its Java sources (src/main/java/...), or nil.
	Sources fs.FS

	once sync.Once
	cp   string
	err  error
}

// Classpath returns the project's classpath: its compiled sources, if
// any, then its dependencies' jars. The first call on a machine resolves
// them (and again when a jar it listed is gone).
func (p *Project) Classpath() (string, error) {
	p.once.Do(func() {
		p.cp, p.err = p.dependencies()
		if p.err == nil && p.Sources != nil {
			var classes string
			classes, p.err = p.compile(p.cp)
			p.cp = classes + string(os.PathListSeparator) + p.cp
		}
	})
	return p.cp, p.err
}

func (p *Project) cacheDir() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	sum := sha256.Sum256(p.Pom)
	return filepath.Join(dir, "beamdedup", "maven", p.Name+"-"+hex.EncodeToString(sum[:6]))
}

func (p *Project) dependencies() (string, error) {
	if _, err := exec.LookPath("java"); err != nil {
		return "", fmt.Errorf("%w: %v", ErrNoJava, err)
	}
	dir := p.cacheDir()
	file := filepath.Join(dir, "classpath.txt")
	if b, err := os.ReadFile(file); err == nil && jarsExist(string(b)) {
		return string(b), nil
	}
	mvn, err := exec.LookPath("mvn")
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrNoJava, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "pom.xml"), p.Pom, 0o644); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), ResolveTimeout)
	defer cancel()
	// Resolve to a temporary name and rename, so that an interrupted or
	// concurrent run never leaves a partial list.
	tmp := fmt.Sprintf("%s.%d.tmp", file, os.Getpid())
	cmd := exec.CommandContext(ctx, mvn, "-B", "-q", "-f", filepath.Join(dir, "pom.xml"),
		"dependency:build-classpath", "-Dmdep.outputFile="+tmp)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("maven: resolving %s's classpath (mvn dependency:build-classpath in %s): %v\n%s", p.Name, dir, err, out.String())
	}
	b, err := os.ReadFile(tmp)
	if err != nil {
		return "", err
	}
	if !jarsExist(string(b)) {
		return "", fmt.Errorf("maven: mvn listed jars that are not there: %s", tmp)
	}
	return string(b), os.Rename(tmp, file)
}

// compile compiles the sources into the cache, in a directory named after
// their hash, and returns it.
func (p *Project) compile(cp string) (string, error) {
	h := sha256.New()
	var files []string
	err := fs.WalkDir(p.Sources, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".java") {
			return err
		}
		b, err := fs.ReadFile(p.Sources, path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", path, len(b))
		h.Write(b)
		files = append(files, path)
		return nil
	})
	if err != nil {
		return "", err
	}
	classes := filepath.Join(p.cacheDir(), "classes-"+hex.EncodeToString(h.Sum(nil)[:6]))
	if _, err := os.Stat(filepath.Join(classes, "ok")); err == nil {
		return classes, nil
	}
	src, err := os.MkdirTemp(p.cacheDir(), "src-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(src)
	args := []string{"-d", filepath.Join(src, "classes"), "-cp", cp, "--release", "17"}
	for _, f := range files {
		b, _ := fs.ReadFile(p.Sources, f)
		path := filepath.Join(src, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return "", err
		}
		args = append(args, path)
	}
	out, err := exec.Command("javac", args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("maven: javac for %s: %v\n%s", p.Name, err, out)
	}
	if err := os.WriteFile(filepath.Join(src, "classes", "ok"), nil, 0o644); err != nil {
		return "", err
	}
	os.RemoveAll(classes)
	return classes, os.Rename(filepath.Join(src, "classes"), classes)
}

// Sub returns the subtree dir of f, for Project.Sources; it panics when
// dir is not a valid path (a mistake in the program).
func Sub(f fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(f, dir)
	if err != nil {
		panic(err)
	}
	return sub
}

func jarsExist(cp string) bool {
	jars := strings.Split(strings.TrimSpace(cp), string(os.PathListSeparator))
	if len(jars) < 10 {
		return false
	}
	for _, jar := range jars {
		if _, err := os.Stat(jar); err != nil {
			return false
		}
	}
	return true
}

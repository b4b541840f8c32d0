package sizetest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// maxAdded is the most that importing and using the transforms may add to
// the stripped binary of a minimal pipeline (Beam's own filter.Distinct
// and stats.Count add 7.7 MB).
const maxAdded = 12 << 20

// programs are the pipelines built: Beam only, KeepFirst, and KeepLast,
// window dedup and the PostgreSQL sink.
var programs = map[string]string{
	"beam": `
	_ = rows`,
	"keepfirst": `
	_ = dedup.KeepFirst(s, rows, rowspec.PartitionBy("id"))`,
	"all": `
	last := dedup.KeepLast(s, rows, rowspec.PartitionBy("id"), rowspec.KindColumn("op"))
	_ = dedup.WindowFirst(s, beam.WindowInto(s, window.NewFixedWindows(time.Minute), rows), rowspec.PartitionBy("id"))
	_ = pgsink.Write(s, last.Rows, last.Spec, pgsink.DSN("postgres://localhost/db"), pgsink.Table("t"))`,
}

const program = `package main

import (
	"context"
	"flag"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"

	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/pgsink"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

var (
	_ = dedup.KeepFirst
	_ = rowspec.PartitionBy
	_ = pgsink.Write
	_ = window.NewFixedWindows
	_ = time.Minute
)

type row struct {
	ID string ` + "`beam:\"id\"`" + `
	Op string ` + "`beam:\"op\"`" + `
}

func main() {
	flag.Parse()
	beam.Init()
	p, s := beam.NewPipelineWithRoot()
	rows := beam.Create(s, row{ID: "a"})
	%s
	if err := beamx.Run(context.Background(), p); err != nil {
		panic(err)
	}
}
`

// source is the program of name: the template without the imports (and
// their blank uses) it does not need, so that each links only what it
// uses.
func source(name string) string {
	src := fmt.Sprintf(program, programs[name])
	var drop []string
	if name != "all" {
		drop = append(drop, "\t\"github.com/beamdedup/beamdedup/transforms/pgsink\"\n", "", "\t_ = pgsink.Write\n", "")
	}
	if name == "beam" {
		drop = append(drop, "\t\"github.com/beamdedup/beamdedup/transforms/dedup\"\n", "", "\t_ = dedup.KeepFirst\n", "",
			"\t\"github.com/beamdedup/beamdedup/transforms/rowspec\"\n", "", "\t_ = rowspec.PartitionBy\n", "")
	}
	return strings.NewReplacer(drop...).Replace(src)
}

// Importing dedup and using KeepFirst, or KeepLast, window dedup and the
// sink, adds at most maxAdded to a minimal pipeline's stripped binary.
func TestTheTransformsAddAtMostTwelveMBToTheStrippedWorkerBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds three binaries")
	}
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	dir := t.TempDir()
	gomod := "module example.com/size\n\ngo 1.26.0\n\nrequire github.com/beamdedup/beamdedup v0.0.0\n\nreplace github.com/beamdedup/beamdedup => " + repo + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644))
	sum, err := os.ReadFile(filepath.Join(repo, "go.sum"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644))
	size := map[string]int64{}
	for _, name := range []string{"beam", "keepfirst", "all"} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, name), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name, "main.go"), []byte(source(name)), 0o644))
		bin := filepath.Join(dir, name+".bin")
		cmd := exec.Command("go", "build", "-ldflags=-s -w", "-o", bin, "./"+name)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "go build %s:\n%s", name, out)
		fi, err := os.Stat(bin)
		require.NoError(t, err)
		size[name] = fi.Size()
		t.Logf("%-9s %6.1f MB stripped", name, float64(fi.Size())/1e6)
	}
	for _, name := range []string{"keepfirst", "all"} {
		added := size[name] - size["beam"]
		require.LessOrEqual(t, added, int64(maxAdded), "%s adds %.1f MB to the stripped binary (bound %d MB): a registration or a dependency grew it; go tool nm -size -sort size on an unstripped build shows which",
			name, float64(added)/1e6, maxAdded>>20)
	}
}

// Package peers runs the other deduplications beside ours on the same
// rows and the same machine, on input from the generators our pipelines
// and benchmarks use (data.go, cmd/peerdata): Flink SQL (flinksql/,
// flinksql-cluster/), Beam Java (beamjava/), Beam Python (beampython/)
// and Beam Go's xlang kafkaio (xlang.go). docs/peers.md has the commands
// and what the runs showed.
//
// Each JVM program prints one line per result, "name key=value ...",
// which Run parses. The Maven projects' classpaths are resolved once per
// machine (internal/maven).
package peers

import (
	"bytes"
	"context"
	"embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/beamdedup/beamdedup/internal/maven"
)

// trees are the peers' Maven projects: each directory's pom.xml and Java
// sources (src/main/java).
//
//go:embed */pom.xml all:flinksql/src all:flinksql-cluster/src all:beamjava/src
var trees embed.FS

// project is the Maven project of trees' dir/pom.xml, with the Java
// sources of directory src ("": none).
func project(name, dir, src string) *maven.Project {
	pom, err := trees.ReadFile(dir + "/pom.xml")
	if err != nil {
		panic(err) // not embedded: a mistake in the program
	}
	p := &maven.Project{Name: name, Pom: pom}
	if src != "" {
		p.Sources = maven.Sub(trees, src+"/src/main/java")
	}
	return p
}

// FlinkSQL is the Flink SQL peer (FlinkSqlPeer.java).
var FlinkSQL = project("flinksql-peer-2.3.0", "flinksql", "flinksql")

// FlinkSQLCluster is the Flink SQL peer that submits its queries to a
// Flink 1.19 session cluster (FlinkSqlClusterPeer.java): RunOnCluster.
var FlinkSQLCluster = project("flinksql-cluster-peer-1.19.0", "flinksql-cluster", "flinksql-cluster")

// FlinkSQLClusterMain is the cluster peer's class.
const FlinkSQLClusterMain = "beamdedup.peers.FlinkSqlClusterPeer"

// RunOnCluster runs Flink SQL's queries (keep_first, keep_last) over the
// orders file input on the Flink session cluster at rest ("host:port"),
// at parallelism par, each a job of that cluster, and returns each one's
// result ("cluster_keep_first": seconds, from its submission to its end).
// The jars of the peer's classpath that cluster lacks (its classpath is
// clusterCP: Flink and Beam's runner, not Flink's table runtime) go with
// each job.
func RunOnCluster(ctx context.Context, rest, clusterCP string, par int, input string, queries ...string) (map[string]Fields, error) {
	cp, err := FlinkSQLCluster.Classpath()
	if err != nil {
		return nil, err
	}
	have := map[string]bool{}
	for _, jar := range filepath.SplitList(clusterCP) {
		have[filepath.Base(jar)] = true
	}
	var ship []string
	for _, jar := range filepath.SplitList(cp) {
		if strings.HasSuffix(jar, ".jar") && !have[filepath.Base(jar)] {
			ship = append(ship, jar)
		}
	}
	args := append([]string{rest, fmt.Sprint(par), strings.Join(ship, string(os.PathListSeparator)), input}, queries...)
	return Run(ctx, FlinkSQLCluster, FlinkSQLClusterMain, args...)
}

// BeamJava is the Beam Java peer (BeamJavaPeer.java) with Beam 2.73.0 and
// its direct runner; BeamJavaFlink the same program with Beam 2.62.0 and
// Flink's classic runner.
var (
	BeamJava      = project("beamjava-peer-2.73.0", "beamjava", "beamjava")
	BeamJavaFlink = project("beamjava-flink-peer-2.62.0", "beamjava-flink", "beamjava")
)

// BeamJavaMain is the Beam Java peer's class.
const BeamJavaMain = "beamdedup.peers.BeamJavaPeer"

// FlinkSQLMain is the Flink SQL peer's class.
const FlinkSQLMain = "beamdedup.peers.FlinkSqlPeer"

// Fields are one result line's key=value pairs.
type Fields map[string]string

// Run runs main of p's classpath with args and returns its result lines
// by name.
func Run(ctx context.Context, p *maven.Project, main string, args ...string) (map[string]Fields, error) {
	cp, err := p.Classpath()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, "java", append([]string{"-Xmx2g", "-Dorg.slf4j.simpleLogger.defaultLogLevel=error", "-cp", cp, main}, args...)...)
	return results(cmd, main+" "+strings.Join(args, " "))
}

// results runs cmd and parses its result lines; what names it in an error.
func results(cmd *exec.Cmd, what string) (map[string]Fields, error) {
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("peers: %s: %v\n%s", what, err, tail(errOut.String(), 4000))
	}
	return ParseResults(out.String()), nil
}

// ParseResults reads "name key=value ..." lines; other lines are ignored.
func ParseResults(out string) map[string]Fields {
	res := map[string]Fields{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || !strings.Contains(f[1], "=") {
			continue
		}
		kv := Fields{}
		for _, p := range f[1:] {
			if k, v, ok := strings.Cut(p, "="); ok {
				kv[k] = v
			}
		}
		res[f[0]] = kv
	}
	return res
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

//go:embed beampython/dedup_peer.py
var pythonPeer []byte

// PythonVersion is the apache-beam release of the Python peer.
const PythonVersion = "2.77.0"

// PythonDefault is the venv .ci/run makes for the Python peer:
// <user cache>/beamdedup/venv-beam-2.77.0/bin/python.
func PythonDefault() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "beamdedup", "venv-beam-"+PythonVersion, "bin", "python")
}

// RunPython runs the Python peer (beampython/dedup_peer.py) with python on
// the prism binary over input and returns its result line.
func RunPython(ctx context.Context, python, prism, input string, args ...string) (map[string]Fields, error) {
	dir, err := os.MkdirTemp("", "pythonpeer-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	script := filepath.Join(dir, "dedup_peer.py")
	if err := os.WriteFile(script, pythonPeer, 0o644); err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, python, append([]string{script, "--prism=" + prism, "--input=" + input}, args...)...)
	cmd.Dir = dir
	return results(cmd, script)
}

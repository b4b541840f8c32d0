// Command gridtable runs testing/bench's grid and Nexmark benchmarks, of
// this tree and, with -before, alternating with another (the code to
// compare against), and prints docs/benchmarks.md's tables, which that
// page explains; the raw outputs stay in -dir, and -render prints the
// tables from such a directory without running anything.
//
//	go run ./testing/bench/gridtable -before ../main            # the whole grid, 3 runs each, about 80 minutes
//	go run ./testing/bench/gridtable -rows 20000 -cases '^(b0_|bz_|c0_)'
//	go run ./testing/bench/gridtable -render /tmp/grid
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/beamdedup/beamdedup/testing/bench"
)

func main() {
	before := flag.String("before", "", "a source tree of this module to compare against (its testing/bench is built and run in turn with this one's)")
	runs := flag.Int("runs", 3, "runs of each binary, alternating")
	rows := flag.Int("rows", 100_000, "rows of the grid's workloads (BEAMDEDUP_BENCH_ROWS)")
	cases := flag.String("cases", ".", "a regexp of the grid's cases to run (the floors b_, b0_, bz_ are always run)")
	workloads := flag.String("workloads", "[0-9]+", "a regexp of the grid's key counts to run (keys=N)")
	events := flag.Int("events", 200_000, "Nexmark events (BEAMDEDUP_NEXMARK_EVENTS); 0: no Nexmark")
	runGrid := flag.Bool("grid", true, "run the grid (false: Nexmark only)")
	dir := flag.String("dir", "", "where the raw outputs go (default a new temporary directory)")
	render := flag.String("render", "", "print the tables from the raw outputs in this directory, running nothing")
	flag.Parse()
	if *render != "" {
		if err := renderDir(os.Stdout, *render); err != nil {
			log.Fatal(err)
		}
		return
	}
	if *dir == "" {
		d, err := os.MkdirTemp("", "gridtable-")
		if err != nil {
			log.Fatal(err)
		}
		*dir = d
	}
	abs, err := filepath.Abs(*dir) // the builds run in their trees
	if err != nil {
		log.Fatal(err)
	}
	*dir = abs
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		log.Fatal(err)
	}
	trees := map[string]string{"before": *before, "after": "."}
	order := []string{"after"}
	if *before != "" {
		order = []string{"before", "after"}
	}
	for _, name := range order {
		if err := build(trees[name], filepath.Join(*dir, name+".test")); err != nil {
			log.Fatal(err)
		}
	}
	grid := fmt.Sprintf("Pipelines/^rows=%d$/^keys=(%s)$/.*/^(b_floor|b0_protocol|bz_stateful|%s)", *rows, *workloads, *cases)
	for i := 1; i <= *runs; i++ {
		for _, name := range order {
			var err error
			if *runGrid {
				err = runBench(*dir, name, i, "grid", grid, fmt.Sprintf("BEAMDEDUP_BENCH_ROWS=%d", *rows))
			}
			if err == nil && *events > 0 {
				err = runBench(*dir, name, i, "nexmark", "^BenchmarkNexmark$", fmt.Sprintf("BEAMDEDUP_NEXMARK_EVENTS=%d", *events))
			}
			if err != nil {
				log.Fatal(err)
			}
		}
	}
	fmt.Fprintf(os.Stderr, "raw outputs in %s\n", *dir)
	if err := renderDir(os.Stdout, *dir); err != nil {
		log.Fatal(err)
	}
}

// build compiles testing/bench's test binary of the module at root.
func build(root, out string) error {
	cmd := exec.Command("go", "test", "-c", "-o", out, "./testing/bench/")
	cmd.Dir, cmd.Stdout, cmd.Stderr = root, os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building the benchmarks of %s: %w", root, err)
	}
	return nil
}

// runBench runs the benchmarks the regexp selected matches once each,
// with binary's test binary in dir and env added, into
// dir/<binary>-<run>-<kind>.txt (readDir's names), with the time and the
// load before and after; a run fails past an hour.
func runBench(dir, binary string, run int, kind, selected, env string) error {
	path := filepath.Join(dir, fmt.Sprintf("%s-%d-%s.txt", binary, run, kind))
	bin := filepath.Join(dir, binary+".test")
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fmt.Fprintf(f, "start %s load %s\n", time.Now().UTC().Format(time.RFC3339), bench.LoadAvg())
	cmd := exec.Command(bin, "-test.run=^$", "-test.benchtime=1x", "-test.timeout=60m", "-test.bench="+selected)
	cmd.Env = append(os.Environ(), env)
	cmd.Stdout, cmd.Stderr = f, io.Discard // the harness's log lines
	fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().UTC().Format("15:04:05"), filepath.Base(path))
	err = cmd.Run()
	fmt.Fprintf(f, "end %s load %s\n", time.Now().UTC().Format(time.RFC3339), bench.LoadAvg())
	if err != nil {
		return fmt.Errorf("%s: %w (output in %s)", bin, err, path)
	}
	return nil
}

// machine describes this machine: cores, CPU model, memory, Go.
func machine() string {
	model := "?"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		if _, err := fmt.Sscanf(string(b), "MemTotal: %d kB", &kb); err == nil {
			mem = fmt.Sprintf(", %.0f GB RAM", float64(kb)/(1<<20))
		}
	}
	return fmt.Sprintf("%d cores (%s)%s, %s/%s, %s", runtime.NumCPU(), model, mem, runtime.GOOS, runtime.GOARCH, runtime.Version())
}

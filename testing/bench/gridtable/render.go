package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/beamdedup/beamdedup/testing/bench"
)

// result is one benchmark line: its metrics by unit.
type result map[string]float64

// runSet is one binary's runs: for each run, each benchmark by workload
// and case.
type runSet struct {
	runs []map[key]result
	// load is the load averages the runs started and ended with.
	load []string
}

// key names a benchmark: its workload ("rows=…/keys=…/dup=…%", or
// "nexmark") and its case.
type key struct{ workload, name string }

// fileName is a raw output's name: the binary, the run, the benchmark.
var fileName = regexp.MustCompile(`^(before|after)-(\d+)-(grid|nexmark)\.txt$`)

// parseLine parses a `go test -bench` result line.
func parseLine(line string) (key, result, bool) {
	f := strings.Fields(line)
	if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
		return key{}, nil, false
	}
	name := f[0]
	if i := strings.LastIndexByte(name, '-'); i > 0 {
		if _, err := strconv.Atoi(name[i+1:]); err == nil {
			name = name[:i] // GOMAXPROCS
		}
	}
	parts := strings.Split(name, "/")
	var k key
	switch {
	case parts[0] == "BenchmarkNexmark" && len(parts) == 2:
		k = key{"nexmark", parts[1]}
	case len(parts) >= 3:
		k = key{strings.Join(parts[1:len(parts)-1], "/"), parts[len(parts)-1]}
	default:
		return key{}, nil, false
	}
	r := result{}
	for i := 2; i+1 < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return key{}, nil, false
		}
		r[f[i+1]] = v
	}
	return k, r, true
}

// readDir reads the raw outputs in dir, by binary.
func readDir(dir string) (map[string]*runSet, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	sets := map[string]*runSet{}
	for _, e := range entries {
		m := fileName.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		run, _ := strconv.Atoi(m[2])
		s := sets[m[1]]
		if s == nil {
			s = &runSet{}
			sets[m[1]] = s
		}
		for len(s.runs) < run {
			s.runs = append(s.runs, map[key]result{})
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		for _, line := range strings.Split(string(b), "\n") {
			if k, r, ok := parseLine(line); ok {
				s.runs[run-1][k] = r
			} else if _, load, ok := strings.Cut(line, " load "); ok && (strings.HasPrefix(line, "start ") || strings.HasPrefix(line, "end ")) {
				s.load = append(s.load, load)
			} else if _, load, ok := strings.Cut(line, "load average: "); ok { // uptime's
				s.load = append(s.load, strings.ReplaceAll(load, ",", ""))
			}
		}
	}
	if sets["after"] == nil {
		return nil, fmt.Errorf("no after-N-grid.txt or after-N-nexmark.txt in %s", dir)
	}
	return sets, nil
}

// values is a metric of k in every run that has it.
func (s *runSet) values(k key, unit string) []float64 {
	var out []float64
	for _, run := range s.runs {
		if v, ok := run[k][unit]; ok {
			out = append(out, v)
		}
	}
	return out
}

// keys are the benchmarks of the runs: the grid's workloads and cases in
// the order the grid runs them (the names sort so within a workload: a
// floor's letter comes first), and Nexmark's cases by name.
func (s *runSet) keys() (workloads, cases, nexmark []string) {
	add := func(l *[]string, v string) {
		if !slices.Contains(*l, v) {
			*l = append(*l, v)
		}
	}
	for _, run := range s.runs {
		for k := range run {
			if k.workload == "nexmark" {
				add(&nexmark, k.name)
			} else {
				add(&workloads, k.workload)
				add(&cases, k.name)
			}
		}
	}
	sort.Slice(workloads, func(i, j int) bool { return keysOf(workloads[i]) > keysOf(workloads[j]) })
	sort.Slice(cases, func(i, j int) bool { return caseOrder(cases[i]) < caseOrder(cases[j]) })
	slices.Sort(nexmark)
	return workloads, cases, nexmark
}

func keysOf(workload string) int {
	for _, p := range strings.Split(workload, "/") {
		if v, ok := strings.CutPrefix(p, "keys="); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return 0
}

// caseOrder puts the floors first, then the cases by their letter.
func caseOrder(name string) string {
	for i, f := range []string{"b_", "b0_", "bz_"} {
		if strings.HasPrefix(name, f) {
			return fmt.Sprint(i)
		}
	}
	return "~" + name
}

// pairRatios are after's metric over before's, run by run (run i of each
// ran one after the other).
func pairRatios(after, before *runSet, k key, unit string) []float64 {
	var out []float64
	for i := range min(len(after.runs), len(before.runs)) {
		a, okA := after.runs[i][k][unit]
		b, okB := before.runs[i][k][unit]
		if okA && okB && b > 0 {
			out = append(out, a/b)
		}
	}
	return out
}

func rate(v float64) string {
	if v >= 1000 {
		return fmt.Sprintf("%.1f K", v/1000)
	}
	return fmt.Sprintf("%.0f", v)
}

func ratio(v float64) string {
	if v >= 10 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func runsOf(v []float64, f func(float64) string) string {
	var s []string
	for _, x := range v {
		s = append(s, f(x))
	}
	return strings.Join(s, ", ")
}

// renderDir prints the tables of the raw outputs in dir.
func renderDir(w io.Writer, dir string) error {
	sets, err := readDir(dir)
	if err != nil {
		return err
	}
	after, before := sets["after"], sets["before"]
	fmt.Fprintf(w, "Machine: %s. %d run(s) of each binary", machine(), len(after.runs))
	loads := after.load
	if before != nil {
		fmt.Fprint(w, ", alternating with the code before")
		loads = slices.Concat(before.load, after.load)
	}
	fmt.Fprintf(w, "; load averages (1, 5, 15 min) at the start and end of each benchmark run: %s.\n\n", strings.Join(loads, "; "))
	workloads, cases, nexmark := after.keys()
	if len(workloads) > 0 {
		gridTable(w, after, workloads, cases)
		metricTable(w, after, workloads, cases, "cpu_µs/row", "CPU per row, µs (the process's: Prism, the SDK harness, the generator and the sink; medians), what docs/scaling.md sizes a job by")
		if before != nil {
			beforeTable(w, after, before, workloads, cases)
		}
	}
	nexmarkTable(w, after, before, nexmark)
	targets(w, after, before, workloads)
	return nil
}

// gridTable is the grid: the floors' rows/s, each case's ratios to the
// protocol floor (b0) and to the runner's ceiling (bz), or to
// filter.Distinct (g) for a bounded case, and its requests per row.
func gridTable(w io.Writer, after *runSet, workloads, cases []string) {
	requests := func(c string) string {
		var reqs []string
		for _, wl := range workloads {
			k := key{wl, c}
			if len(after.values(k, "rows/s")) == 0 {
				reqs = append(reqs, "")
			} else {
				reqs = append(reqs, fmt.Sprintf("%.2g", bench.Median(after.values(k, "requests/row"))))
			}
		}
		return strings.Join(reqs, " / ")
	}
	caseTable(w, "Grid: the floors' rows/s; each case's rows/s, its ratio to the protocol floor (b0, same run) and to the runner's ceiling (bz, same run), or for a bounded case to filter.Distinct (g); medians of the runs.", workloads, cases, func(k key) string {
		rs := after.values(k, "rows/s")
		if len(rs) == 0 {
			return ""
		}
		cell := rate(bench.Median(rs))
		for _, x := range []struct{ unit, of string }{{"x_protocol", "b0"}, {"x_ceiling", "bz"}, {"x_distinct", "g"}} {
			if v := after.values(k, x.unit); len(v) > 0 {
				cell += fmt.Sprintf(", %s× %s", ratio(bench.Median(v)), x.of)
			}
		}
		return cell
	}, requests)
}

// caseTable prints title and, after a blank line, a table of a row per
// case and a column per workload: cell is a case's cell in a workload
// ("": empty); requests, if not nil, fills a last column of requests per
// row.
func caseTable(w io.Writer, title string, workloads, cases []string, cell func(key) string, requests func(c string) string) {
	fmt.Fprintln(w, title)
	fmt.Fprint(w, "\n| case |")
	for _, wl := range workloads {
		fmt.Fprintf(w, " %s |", wl)
	}
	if requests != nil {
		fmt.Fprint(w, " requests/row |")
	}
	fmt.Fprint(w, "\n| --- |")
	for range workloads {
		fmt.Fprint(w, " ---: |")
	}
	if requests != nil {
		fmt.Fprint(w, " --- |")
	}
	fmt.Fprintln(w)
	for _, c := range cases {
		fmt.Fprintf(w, "| %s |", c)
		for _, wl := range workloads {
			if v := cell(key{wl, c}); v != "" {
				fmt.Fprintf(w, " %s |", v)
			} else {
				fmt.Fprint(w, " |")
			}
		}
		if requests != nil {
			fmt.Fprintf(w, " %s |", requests(c))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
}

// metricTable is one metric of every case, medians of the runs.
func metricTable(w io.Writer, after *runSet, workloads, cases []string, unit, title string) {
	caseTable(w, title+".", workloads, cases, func(k key) string {
		if v := after.values(k, unit); len(v) > 0 {
			return fmt.Sprintf("%.3g", bench.Median(v))
		}
		return ""
	}, nil)
}

// beforeTable is each case against the code before: rows/s before and
// after, and the median of the ratios of runs made one after the other.
func beforeTable(w io.Writer, after, before *runSet, workloads, cases []string) {
	caseTable(w, "Against the code before: rows/s before → after (medians), and the median of after ÷ before over runs made one after the other (the runs' ratios in brackets).", workloads, cases, func(k key) string {
		pr := pairRatios(after, before, k, "rows/s")
		if len(pr) == 0 {
			return ""
		}
		return fmt.Sprintf("%s → %s: %s× (%s)", rate(bench.Median(before.values(k, "rows/s"))), rate(bench.Median(after.values(k, "rows/s"))), ratio(bench.Median(pr)), runsOf(pr, ratio))
	}, nil)
}

// nexmarkTable is Nexmark q0 and q18 (names: after's cases): events/s, the
// ratio to q0 of the same run, requests per event, after and before.
func nexmarkTable(w io.Writer, after, before *runSet, names []string) {
	if len(names) == 0 {
		return
	}
	fmt.Fprintln(w, "Nexmark: events/s (median, the runs' range), ÷ q0 of the same run (median; the runs), requests per event.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| case | events/s | ÷ q0 | requests/event |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: |")
	for _, set := range []struct {
		label string
		s     *runSet
	}{{"", after}, {", the code before", before}} {
		if set.s == nil {
			continue
		}
		for _, n := range names {
			k := key{"nexmark", n}
			ev := set.s.values(k, "events/s")
			if len(ev) == 0 {
				continue
			}
			x := set.s.values(k, "x_q0")
			xq := "1"
			if len(x) > 0 {
				xq = fmt.Sprintf("%s (%s)", ratio(bench.Median(x)), runsOf(x, ratio))
			}
			fmt.Fprintf(w, "| %s%s | %s (%s–%s) | %s | %.2f |\n", n, set.label, rate(bench.Median(ev)), rate(slices.Min(ev)), rate(slices.Max(ev)), xq, bench.Median(set.s.values(k, "requests/event")))
		}
	}
	fmt.Fprintln(w)
}

// targets checks the overlapped state requests' targets: c0 ≥ 2× b0 at 0%
// duplicates; d, e, f, l0, m, n ≥ 1.5× the code before; q18 stateful ≥
// 0.2× q0.
func targets(w io.Writer, after, before *runSet, workloads []string) {
	fmt.Fprintln(w, "Targets (medians):")
	fmt.Fprintln(w)
	line := func(what string, got, want float64, runs []float64) {
		verdict := "met"
		if got < want {
			verdict = fmt.Sprintf("missed by %.0f%%", 100*(1-got/want))
		}
		fmt.Fprintf(w, "- %s: %s× (runs %s; target ≥ %g): %s\n", what, ratio(got), runsOf(runs, ratio), want, verdict)
	}
	for _, wl := range workloads {
		if !strings.HasSuffix(wl, "/dup=0%") {
			continue
		}
		if v := after.values(key{wl, "c0_keepfirst_stateful_no_minibatch"}, "x_protocol"); len(v) > 0 {
			line("c0 ÷ b0, "+wl, bench.Median(v), 2.0, v)
		}
	}
	if before != nil {
		for _, wl := range workloads {
			for _, c := range []string{"d_keepfirst_stateful_ttl_refresh", "e_keepfirst_stateful_eventtime", "f_keepfirst_stateful_changelog",
				"l0_keeplast_stateful_no_minibatch", "m_keeplast_stateful_upsert", "n_keeplast_stateful_eventtime"} {
				if pr := pairRatios(after, before, key{wl, c}, "rows/s"); len(pr) > 0 {
					line(c[:strings.IndexByte(c, '_')]+" ÷ before, "+wl, bench.Median(pr), 1.5, pr)
				}
			}
		}
	}
	if v := after.values(key{"nexmark", "q18_keeplast_stateful"}, "x_q0"); len(v) > 0 {
		line("q18 stateful ÷ q0", bench.Median(v), 0.2, v)
	}
	fmt.Fprintln(w)
}

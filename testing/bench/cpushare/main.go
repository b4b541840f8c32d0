// Command cpushare prints the share of each owner (ours, Beam's SDK,
// Prism, ...: owners) of a Go CPU profile of a pipeline run on Prism in
// process, each sample given to its innermost frame outside Go's runtime
// and standard library (notes/performance.md, "A row's cost before state
// per bucket"). With -rows it adds CPU µs per row; with -detail the
// functions of the owners whose name contains it.
//
//	BEAMDEDUP_ORDERS_ROUNDS=1 go test -run='^$' -bench='OrdersFile/round1/keepfirst_bounded$' \
//	    -benchtime=1x -cpuprofile=/tmp/kfb.out ./testing/bench/
//	go run ./testing/bench/cpushare -rows=592442 /tmp/kfb.out
package main

import (
	"cmp"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/google/pprof/profile"
)

// owner is a rule: functions matching re are owner's.
type owner struct {
	name string
	re   *regexp.Regexp
}

// owners are tried in order; the first match owns the sample.
var owners = []owner{
	{"ours: JSON decode (pipelines/jsonl)", regexp.MustCompile(`pipelines/jsonl\.(parse|\(\*parseFn\)|loneSurrogate)`)},
	{"ours: JSON encode (pipelines/jsonl)", regexp.MustCompile(`pipelines/jsonl\.`)},
	{"ours: row coder (pipelines/orders)", regexp.MustCompile(`pipelines/orders\.(encode|decode)Order`)},
	{"ours: dedup (transforms, coders)", regexp.MustCompile(`beamdedup/(transforms|coders)/`)},
	{"ours: other (the floors' DoFns, the pipelines, test hooks)", regexp.MustCompile(`beamdedup/`)},
	{"Beam SDK: schema rows", regexp.MustCompile(`beam/core/graph/coder\.\(\*Row(En|De)coderBuilder\)|beam/core/runtime/graphx/schema|beam/core/runtime/exec\.\(\*row(En|De)coder\)|beam\.time(Enc|Dec)`)},
	{"Beam SDK: coders, element streams", regexp.MustCompile(`beam/core/runtime/exec\.[^ ]*([Cc]oder|[Ee]ncode|[Dd]ecode)|beam/core/graph/coder|beam/core/util/ioutilx|beam/core/runtime/coderx|beam/core/typex|beam/core/graph/mtime`)},
	{"Beam SDK: state requests", regexp.MustCompile(`beam/core/runtime/harness\.\(\*(StateChannel|stateKey|ScopedStateReader)|beam/core/runtime/harness/statecache|beam/core/runtime/exec\.[^ ]*[Ss]tate`)},
	{"Beam SDK: I/O (textio, fileio, filesystem)", regexp.MustCompile(`beam/io/`)},
	{"Beam SDK: DoFn invocation (exec, reflectx, register)", regexp.MustCompile(`beam/core/runtime/exec|beam/core/util/reflectx|beam/core/funcx|beam/register|beam/core/metrics|beam/core/graph`)},
	{"Beam SDK: harness, data channel", regexp.MustCompile(`beam/core/runtime`)},
	{"Prism: element manager", regexp.MustCompile(`runners/prism/internal/engine`)},
	{"Prism: data, state and job services", regexp.MustCompile(`runners/prism`)},
	{"Beam SDK: other", regexp.MustCompile(`apache/beam/`)},
	{"gRPC, protobuf", regexp.MustCompile(`google\.golang\.org/(grpc|protobuf)|golang\.org/x/net`)},
	{"other modules", regexp.MustCompile(`.`)},
}

// runtimeOwn is the owner of samples with no frame outside the standard
// library.
const runtimeOwn = "Go runtime alone (GC workers, scheduler)"

// std reports whether fn is in the standard library or the runtime: no
// dot in its import path's first element.
func std(fn string) bool {
	first, _, _ := strings.Cut(fn, "/")
	if first == fn {
		first, _, _ = strings.Cut(fn, ".")
	}
	return !strings.Contains(first, ".") || strings.HasPrefix(fn, "type:.")
}

// ownerOf is the owner of a sample's stack and the function that owns it.
func ownerOf(s *profile.Sample) (string, string) {
	for _, loc := range s.Location {
		for i := len(loc.Line) - 1; i >= 0; i-- { // the inlined frames first
			fn := loc.Line[i].Function.Name
			if std(fn) {
				continue
			}
			for _, o := range owners {
				if o.re.MatchString(fn) {
					return o.name, fn
				}
			}
		}
	}
	return runtimeOwn, ""
}

func main() {
	rows := flag.Float64("rows", 0, "the run's rows, for CPU µs per row")
	detail := flag.String("detail", "", "list the functions of the owners whose name contains this")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: cpushare [-rows N] [-detail OWNER] cpu.out")
		os.Exit(2)
	}
	if err := run(os.Stdout, flag.Arg(0), *rows, *detail); err != nil {
		fmt.Fprintln(os.Stderr, "cpushare:", err)
		os.Exit(1)
	}
}

func run(w io.Writer, path string, rows float64, detail string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		return err
	}
	cpu := len(p.SampleType) - 1 // cpu nanoseconds, after the sample count
	byOwner, byFunc := map[string]int64{}, map[string]int64{}
	var total int64
	for _, s := range p.Sample {
		v := s.Value[cpu]
		total += v
		o, fn := ownerOf(s)
		byOwner[o] += v
		if detail != "" && strings.Contains(o, detail) {
			byFunc[fn] += v
		}
	}
	if total == 0 {
		return fmt.Errorf("%s has no CPU samples", path)
	}
	fmt.Fprintf(w, "%.2f s of CPU", float64(total)/1e9)
	if rows > 0 {
		fmt.Fprintf(w, ", %.1f µs/row", float64(total)/1e3/rows)
	}
	fmt.Fprintln(w)
	for _, o := range sorted(byOwner) {
		fmt.Fprintf(w, "%5.1f%%", 100*float64(byOwner[o])/float64(total))
		if rows > 0 {
			fmt.Fprintf(w, " %7.2f µs/row", float64(byOwner[o])/1e3/rows)
		}
		fmt.Fprintf(w, "  %s\n", o)
	}
	for i, fn := range sorted(byFunc) {
		if i == 40 {
			break
		}
		fmt.Fprintf(w, "      %5.1f%%  %s\n", 100*float64(byFunc[fn])/float64(total), fn)
	}
	return nil
}

// sorted are m's keys by their values, highest first, then by name.
func sorted(m map[string]int64) []string {
	return slices.SortedFunc(maps.Keys(m), func(a, b string) int { return cmp.Or(cmp.Compare(m[b], m[a]), strings.Compare(a, b)) })
}

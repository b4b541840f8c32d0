// Command runjob runs one of the sample deduplication pipelines — orders,
// userevents, cdc (pipelines/...), the Pub/Sub streaming pipeline (a
// demo, or a real subscription until Ctrl-C), or the Kafka pipeline of
// seed 001 — on a Beam runner, and prints a summary from the job's
// metrics.
//
// With no flags it generates sample orders (every order priced under 100
// duplicated exactly), deduplicates them by order_id on Prism, Beam's local
// runner, in this process, and prints how many rows came in, how many were
// emitted and dropped, and where the output went:
//
//	go run ./cmd/runjob
//
// runjob --help lists every flag, with examples of each pipeline and
// runner; docs/samples.md describes the samples and the summary. Beam's own
// flags (--runner, --endpoint, ...) are accepted as in any Beam Go program.
// A job that stops making progress (--stall_limit) or outlives --timeout
// is cancelled (internal/jobrun).
//
// The binary also serves as its own Beam worker: runners that start it
// with --worker (the boot loader of a worker pool, or a PROCESS or DOCKER
// environment, given --worker_binary) get the SDK harness (beam.Init).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/harness/init" // worker mode (--worker)
	beamlog "github.com/apache/beam/sdks/v2/go/pkg/beam/log"

	// Runners, selected by --runner.
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/dataflow"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/dot"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/flink"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/spark"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/universal"

	"github.com/beamdedup/beamdedup/internal/flinkopts"
	"github.com/beamdedup/beamdedup/internal/jobrun"
	"github.com/beamdedup/beamdedup/pipelines/orderstatus"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second Ctrl-C kills at once
	}()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// options are runjob's own flags.
type options struct {
	pipeline     string
	input        string
	output       string
	errors       string
	count        int
	seed         uint64
	partitionBy  string
	onTime       string
	stateTTL     time.Duration
	eventTTL     time.Duration
	resetOnDup   bool
	stateBuckets int
	uid          string
	stateful     bool
	graph        string
	timeout      time.Duration
	stallLimit   time.Duration
	verbose      bool
	postgres     string          // orderstatus: the DSN of the status table's database
	set          map[string]bool // flags given on the command line
	runner       string          // resolved runner
	inputNote    string          // how the input came about
	distinctRows int             // distinct order_ids of generated input; 0 if unknown
	live         liveOptions     // --pipeline=streaming against a subscription
	flink        *flinkopts.Options
	flinkREST    string       // the Flink cluster's REST address
	kafka        kafkaOptions // --pipeline=kafka
}

// newFlagSet defines runjob's flags on a new FlagSet and shares Beam's
// global flags (flag.CommandLine) into it, so that parsing sets Beam's
// options. Tests call run repeatedly, so Beam's flags are reset to their
// defaults first (prism, for one, stores its in-process endpoint in
// --endpoint).
func newFlagSet(o *options) *flag.FlagSet {
	fs := flag.NewFlagSet("runjob", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported in one line by run
	fs.StringVar(&o.pipeline, "pipeline", pipelineNames[0], "sample pipeline: "+strings.Join(pipelineNames, "|"))
	fs.StringVar(&o.input, "input", "", "input JSON Lines file or glob (local or gs://); default: generated orders, or testing/testdata/<pipeline>/input.jsonl")
	fs.StringVar(&o.output, "output", "", "output JSON Lines file (local or gs://); default: <tmp>/beamdedup/<pipeline>/output.jsonl")
	fs.StringVar(&o.errors, "errors", "", "dead-letter JSON Lines file; default: the output with .errors.jsonl")
	fs.IntVar(&o.count, "count", 1000, "orders to generate when --input is not given (also the streaming demo's keys)")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the generated orders")
	fs.StringVar(&o.partitionBy, "partition_by", "", "comma-separated key columns (PartitionBy); default: the pipeline's (order_id, user_id, user_name)")
	fs.StringVar(&o.onTime, "on_time", "", "event-time column (OnTime); default: rowtime for userevents, none otherwise")
	fs.DurationVar(&o.stateTTL, "state_ttl", 0, "processing-time state retention (StateTTL), e.g. 2h; 0 = forever; default: 2h for orders")
	fs.DurationVar(&o.eventTTL, "event_time_ttl", 0, "event-time retention (EventTimeTTL), e.g. 2h; the one to use on Flink")
	fs.BoolVar(&o.resetOnDup, "reset_ttl_on_duplicate", true, "a dropped duplicate refreshes the key's retention (ResetTTLOnDuplicate)")
	fs.IntVar(&o.stateBuckets, "state_buckets", 0, "keep the dedup step's state in this many key-hash buckets (StateBuckets); 0 = a cell per key; default: 128 on a file with --force_stateful, a cell per key on a stream")
	fs.StringVar(&o.uid, "uid", "", "UID of the KeepFirst step; default: orders-dedup, user-events-dedup, cdc-dedup")
	fs.BoolVar(&o.stateful, "force_stateful", false, "use KeepFirst's stateful (streaming) expansion on a file too, as an unbounded source would")
	fs.StringVar(&o.graph, "graph", "", "write the pipeline graph in DOT to this file before running")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "give up on the job after this long (cancel it, exit 1); 0 = never. With --subscription: stop it then (drain, exit 0), only when given")
	fs.DurationVar(&o.stallLimit, "stall_limit", jobrun.DefaultStallLimit, "when the job makes no progress this long (no SDK worker reports, no bundle finishes; with --subscription: a step holds work and finishes none, or nothing commits at all), cancel it and exit 1 saying what did not happen; 0 = the default, negative (-1s) = no watchdog")
	fs.BoolVar(&o.verbose, "verbose", false, "show the runner's and the SDK's info logs")
	fs.StringVar(&o.postgres, "postgres", "", "orderstatus: write each order's current status into the table "+orderstatus.DefaultTable+" of this PostgreSQL database (a DSN; created if missing; give the password in PGPASSWORD, not in the DSN); streaming with --subscription, kafka: each kept order into its table orders")
	addLiveFlags(fs, &o.live)
	o.flink = flinkopts.Register(fs)
	fs.StringVar(&o.flinkREST, "flink_rest", "", "flink: the REST address (HOST:PORT) of the Flink cluster the job server submits to (its --flink-master): the watchdog follows the job's progress there, since Flink reports metrics to the Job API only when a job ends")
	addKafkaFlags(fs, &o.kafka)
	flag.CommandLine.VisitAll(func(f *flag.Flag) {
		if strings.HasPrefix(f.Name, "test.") || fs.Lookup(f.Name) != nil {
			return
		}
		if f.Value.String() != f.DefValue {
			// Only scalar flags get here in practice: a list flag's Set
			// appends, so it cannot be reset this way.
			f.Value.Set(f.DefValue)
		}
		fs.Var(f.Value, f.Name, f.Usage)
	})
	return fs
}

// parseOptions parses runjob's command line and records which flags were
// given (options.set). It returns the flag set for --help's usage; the
// options are checked by checkOptions.
func parseOptions(args []string) (*options, *flag.FlagSet, error) {
	o := &options{}
	fs := newFlagSet(o)
	if err := fs.Parse(args); err != nil {
		return o, fs, err
	}
	if fs.NArg() > 0 {
		return o, fs, fmt.Errorf("unexpected argument %q: every setting is a --flag", fs.Arg(0))
	}
	o.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })
	return o, fs, nil
}

// run is runjob: every pipeline takes this one path, from the command
// line to the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "runjob: "+format+"\n", a...)
		return 2
	}
	o, fs, err := parseOptions(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(stdout, fs)
			return 0
		}
		return fail("%s", flagError(err, fs))
	}
	// Record Beam flags as set on flag.CommandLine too: runners export the
	// set flags as pipeline options for remote workers. They are put back
	// as found when run returns, so that a later run in the same process (a
	// test) does not inherit them.
	found := map[string]string{}
	fs.Visit(func(f *flag.Flag) {
		if g := flag.CommandLine.Lookup(f.Name); g != nil {
			found[f.Name] = g.Value.String()
			flag.CommandLine.Set(f.Name, f.Value.String())
		}
	})
	defer func() {
		for name, v := range found {
			flag.CommandLine.Set(name, v)
		}
	}()
	// beam.Init sets up slog at this level. Prism logs every job step at
	// info, which would bury the summary; a Dataflow dry run prints its
	// translation at info.
	verbose := o.verbose || flagValue("dry_run") == "true"
	beamlog.LogLevel = "warn"
	if verbose {
		beamlog.LogLevel = "info"
	}
	// In worker mode (--worker, set by a runner that starts this binary)
	// this runs the SDK harness and exits.
	beam.Init()
	if !verbose {
		// runjob says in one line why a job failed; the runner's and
		// Prism's logs of it (--verbose shows them) would repeat it in
		// many.
		slog.SetDefault(slog.New(slog.DiscardHandler))
	}

	if err := checkOptions(o); err != nil {
		return fail("%v", err)
	}
	pl, _ := pipelineOf(o) // checkOptions checked the name
	runner, notice, err := resolveRunner(ctx)
	if err != nil {
		return fail("%v", err)
	}
	if notice != "" {
		fmt.Fprintln(stderr, "runjob: "+notice)
	}
	o.runner = runner
	if jobrun.MayBePrism(runner) {
		// Before construction, where the stateful transforms check it
		// (jobrun.Start adds it to the submission anyway).
		defer jobrun.DisableSplits()()
	}
	if err := pl.checkRunner(o); err != nil {
		return fail("%v", err)
	}
	job, warning, err := jobOptions(o)
	if err != nil {
		return fail("%v", err)
	}
	if warning != "" {
		fmt.Fprintln(stderr, "runjob: warning: "+warning)
	}
	if pl.prepare != nil {
		if err := pl.prepare(o); err != nil {
			return fail("%s", setupError(err))
		}
	}
	if pl.build != nil { // construction errors are the command line's
		_, s := beam.NewPipelineWithRoot()
		if err := pl.build(s, o); err != nil {
			return fail("%s", setupError(err))
		}
	}
	// A live run goes on until stopped: --timeout, only when given, is
	// its stop (a drain), not a failure. Any other run gets it as the
	// job's timeout.
	if pl.untilStopped {
		if o.timeout > 0 && o.set["timeout"] {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, o.timeout)
			defer cancel()
		}
	} else {
		job.Timeout = o.timeout
	}
	start := time.Now()
	report, err := pl.run(ctx, o, job, stderr)
	wall := time.Since(start)
	if err != nil {
		reason := oneLine(err)
		var to *jobrun.TimedOut
		if errors.As(err, &to) {
			reason = fmt.Sprintf("the job did not end within --timeout=%v; it was cancelled in the runner (give a longer --timeout, or 0 for none)", o.timeout)
		}
		fmt.Fprintf(stderr, "runjob: %s failed after %v: %s\n", pl.describe(o), wall.Round(time.Millisecond), reason)
		return 1
	}
	return report(stdout, stderr, wall)
}

// checkOptions rejects values that are wrong whatever the runner, and
// flags that do not apply to the pipeline (flagsApply).
func checkOptions(o *options) error {
	pl, ok := pipelineOf(o)
	if !ok {
		return fmt.Errorf("--pipeline=%q: want one of %s", o.pipeline, strings.Join(pipelineNames, ", "))
	}
	if o.count <= 0 {
		return fmt.Errorf("--count=%d: want a positive number of orders", o.count)
	}
	if o.stateTTL < 0 || o.eventTTL < 0 {
		return fmt.Errorf("--state_ttl and --event_time_ttl must be >= 0 (0 disables), got %v and %v", o.stateTTL, o.eventTTL)
	}
	if o.stateBuckets < 0 {
		return fmt.Errorf("--state_buckets=%d: want 0 (a cell per key) or a number of buckets", o.stateBuckets)
	}
	if err := flagsApply(o); err != nil {
		return err
	}
	if err := o.flink.Check(); err != nil {
		return err
	}
	if pl.check != nil {
		return pl.check(o)
	}
	return nil
}

// dedupOptions turns the flags that were given into KeepFirst options; the
// pipeline's defaults apply to the rest.
func dedupOptions(o *options) []dedup.Option {
	var opts []dedup.Option
	if o.set["partition_by"] {
		opts = append(opts, rowspec.PartitionBy(columns(o.partitionBy)...))
	}
	if o.set["on_time"] {
		opts = append(opts, rowspec.OnTime(o.onTime))
	}
	if o.set["state_ttl"] {
		opts = append(opts, dedup.StateTTL(o.stateTTL))
	}
	if o.set["event_time_ttl"] {
		opts = append(opts, dedup.EventTimeTTL(o.eventTTL))
	}
	if o.set["reset_ttl_on_duplicate"] {
		opts = append(opts, dedup.ResetTTLOnDuplicate(o.resetOnDup))
	}
	if o.set["state_buckets"] {
		opts = append(opts, dedup.StateBuckets(o.stateBuckets))
	}
	if o.set["uid"] {
		opts = append(opts, dedup.UID(o.uid))
	}
	if o.stateful {
		opts = append(opts, dedup.AsStream())
	}
	return opts
}

// columns is a comma-separated list of columns.
func columns(list string) []string {
	var cols []string
	for c := range strings.SplitSeq(list, ",") {
		if c = strings.TrimSpace(c); c != "" {
			cols = append(cols, c)
		}
	}
	return cols
}

// oneLine keeps the first line of an error: Beam's errors carry stacks of
// context lines. When the first line ends in a colon ("job job-006
// failed:" from the universal runner), the reason is the job server's
// message below it, whose last line is the innermost cause (Prism's
// message lists the job's key and name first, in terminal colours).
func oneLine(err error) string {
	var lines []string
	for l := range strings.SplitSeq(ansiColour.ReplaceAllString(err.Error(), ""), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		return ""
	}
	s := lines[0]
	if strings.HasSuffix(s, ":") && len(lines) > 1 {
		s += " " + causeNumber.ReplaceAllString(lines[len(lines)-1], "")
	}
	return s
}

var (
	ansiColour  = regexp.MustCompile("\x1b\\[[0-9;]*m")
	causeNumber = regexp.MustCompile(`^[0-9]+: `)
)

// flagValue returns the value of one of Beam's flags.
func flagValue(name string) string {
	if f := flag.CommandLine.Lookup(name); f != nil {
		return f.Value.String()
	}
	return ""
}

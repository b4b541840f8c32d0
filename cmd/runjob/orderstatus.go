package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamdedup/beamdedup/pipelines/jsonl"
	"github.com/beamdedup/beamdedup/pipelines/orderstatus"
	"github.com/beamdedup/beamdedup/transforms/changelog"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/pgsink"
)

// orderStatusRun runs the keep-last sample (pipelines/orderstatus) on
// generated order events, or --input, with the stateful expansions a
// stream gets, and prints the changelog's counts, the count per status and
// the naive count per status side by side. Every number is read from the
// job's metrics and output files.
var orderStatusRun = pipelineRun{
	prepare: func(o *options) error {
		if err := prepareFiles(o, orderStatusInput); err != nil {
			return err
		}
		naive, changes := orderStatusFiles(o)
		for _, p := range []string{naive, changes} {
			if isLocal(p) {
				os.Remove(p)
			}
		}
		if o.postgres == "" {
			return nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return orderstatus.CreateTable(ctx, o.postgres, orderstatus.DefaultTable)
	},
	build:    buildOrderStatus,
	describe: pipelineOn,
	run:      jobOf(buildOrderStatus, summarizeOrderStatus),
}

// orderStatusFiles are the naive count's and the changelog's files, next
// to the output.
func orderStatusFiles(o *options) (naive, changes string) {
	base := strings.TrimSuffix(o.output, ".jsonl")
	return base + ".naive.jsonl", base + ".changes.jsonl"
}

func buildOrderStatus(s beam.Scope, o *options) error {
	naive, changes := orderStatusFiles(o)
	_, err := orderstatus.Build(s, orderstatus.Config{Input: o.input, Output: o.output, Errors: o.errors,
		Naive: naive, Changes: changes, Stateful: true, Dedup: dedupOptions(o), Postgres: o.postgres})
	return err
}

func summarizeOrderStatus(stdout, stderr io.Writer, o *options, pr beam.PipelineResult, wall time.Duration) int {
	naive, changes := orderStatusFiles(o)
	fmt.Fprintf(stdout, "pipeline            orderstatus on %s\n", runnerNote(o.runner))
	fmt.Fprintf(stdout, "input               %s (%s)\n", o.input, o.inputNote)
	if pr == nil || !isLocal(o.output) {
		fmt.Fprintf(stdout, "summary             none: no job result or a remote output (see the output files)\n")
		return 0
	}
	kinds, err1 := countKinds(changes)
	final, err2 := readCounts(o.output)
	naiveCounts, err3 := readCounts(naive)
	for _, err := range []error{err1, err2, err3} {
		if err != nil {
			fmt.Fprintf(stderr, "runjob: reading the outputs: %v\n", err)
			return 1
		}
	}
	events, orders := sum(naiveCounts), sum(final)
	d := dedup.LastCountersOf(pr, orderstatus.UID)
	dups, late := d.DuplicatesDropped, d.OutOfOrderDropped
	malformed := jsonl.ReadMalformed(pr)
	c := changelog.ReadCounters(pr)
	pairs := min(kinds["-U"], kinds["+U"])
	fmt.Fprintf(stdout, "lines               %s\n", lineCounts(jsonl.Total(jsonl.ReadInputs(pr))))
	fmt.Fprintf(stdout, "events in           %d (%d malformed lines dead-lettered)\n", events, malformed)
	fmt.Fprintf(stdout, "orders              %d (each counted once below)\n", orders)
	fmt.Fprintf(stdout, "changelog           %d +I, %d -U/+U pairs, %d -D (keep-last by order_id in event time)\n", kinds["+I"], pairs, kinds["-D"])
	fmt.Fprintf(stdout, "resends suppressed  %d identical to the order's last row (Flink emits a -U/+U pair for each: %d pairs)\n", dups, pairs+dups)
	if late > 0 {
		fmt.Fprintf(stdout, "out of order        %d dropped: older than the order's last row\n", late)
	}
	fmt.Fprintf(stdout, "%-19s %7s %7s\n", "status", "count", "naive")
	for _, st := range statuses(final, naiveCounts) {
		fmt.Fprintf(stdout, "  %-17s %7d %7d\n", st, final[st], naiveCounts[st])
	}
	fmt.Fprintf(stdout, "  %-17s %7d %7d   (naive: every event counted, one order in several statuses)\n", "total", orders, events)
	if o.postgres != "" {
		if code := summarizeTable(stdout, stderr, o, pr, final); code != 0 {
			return code
		}
	}
	if c.DeadLettered+c.GroupsBelowZero > 0 {
		fmt.Fprintf(stdout, "count dead letters  %d (see %s)\n", c.DeadLettered+c.GroupsBelowZero, o.errors)
	}
	fmt.Fprintf(stdout, "wall time           %v\n", wall.Round(time.Millisecond))
	fmt.Fprintf(stdout, "outputs             %s (count per status), %s, %s\n", o.output, filepath.Base(naive), filepath.Base(changes))
	return 0
}

// orderStatusInput writes the generated events for --pipeline=orderstatus:
// seed 003's shape by default, scaled to --count orders when it is given.
func orderStatusInput(o *options) error {
	path, err := generatedInput(o, "generated events")
	if err != nil {
		return err
	}
	o.input = path
	cfg := orderstatus.DefaultGen
	if o.set["seed"] {
		cfg.Seed = o.seed
	}
	if o.set["count"] {
		n := o.count
		cfg = orderstatus.GenConfig{Orders: n, Events: n * cfg.Events / cfg.Orders, Resends: n * cfg.Resends / cfg.Orders, Late: n * cfg.Late / cfg.Orders, Seed: cfg.Seed}
	}
	if err := orderstatus.WriteSample(o.input, cfg); err != nil {
		return fmt.Errorf("writing generated events: %w", err)
	}
	o.inputNote = fmt.Sprintf("generated: %d events for %d orders, %d identical resends, %d delivered after a later status, seed %d",
		cfg.Events, cfg.Orders, cfg.Resends, cfg.Late, cfg.Seed)
	return nil
}

// countKinds counts the op column of a changelog file.
func countKinds(path string) (map[string]int64, error) {
	kinds := map[string]int64{}
	return kinds, eachLine(path, func(b []byte) error {
		var r struct {
			Op string `json:"op"`
		}
		err := json.Unmarshal(b, &r)
		kinds[r.Op]++
		return err
	})
}

// readCounts reads a file of changelog.GroupCount rows.
func readCounts(path string) (map[string]int64, error) {
	counts := map[string]int64{}
	return counts, eachLine(path, func(b []byte) error {
		var c changelog.GroupCount
		err := json.Unmarshal(b, &c)
		counts[c.Group] = c.Count
		return err
	})
}

func eachLine(path string, f func([]byte) error) error {
	file, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil // textio writes no file for an empty collection
	}
	if err != nil {
		return err
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	for sc.Scan() {
		if len(sc.Bytes()) > 0 {
			if err := f(sc.Bytes()); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
		}
	}
	return sc.Err()
}

func sum(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// statuses lists the statuses of both counts in lifecycle order, others
// after them by name.
func statuses(a, b map[string]int64) []string {
	order := []string{orderstatus.Created, orderstatus.Paid, orderstatus.Shipped, orderstatus.Cancelled}
	var extra []string
	for _, m := range []map[string]int64{a, b} {
		for k := range m {
			if !slices.Contains(order, k) && !slices.Contains(extra, k) {
				extra = append(extra, k)
			}
		}
	}
	slices.Sort(extra)
	return append(order, extra...)
}

// summarizeTable compares the PostgreSQL table's count per status with the
// pipeline's: they must be equal, each order once in its current status.
func summarizeTable(stdout, stderr io.Writer, o *options, pr beam.PipelineResult, final map[string]int64) int {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	table, err := orderstatus.TableCounts(ctx, o.postgres, orderstatus.DefaultTable)
	if err != nil {
		fmt.Fprintf(stderr, "runjob: reading the table: %v\n", setupError(err))
		return 1
	}
	w := pgsink.ReadCounters(pr)
	fmt.Fprintf(stdout, "postgres            %d rows written, %d skipped (a -U, folded away in its batch, or as stored), %d deleted, %d dead-lettered into table %s\n",
		w.Written, w.Skipped, w.Deleted, w.DeadLettered, orderstatus.DefaultTable)
	if !maps.Equal(table, final) {
		fmt.Fprintf(stdout, "table per status    %v: differs from the count per status\n", table)
		return 1
	}
	fmt.Fprintf(stdout, "table per status    SELECT status, count(*) ... GROUP BY status equals the count per status\n")
	return 0
}

// Package orderstatus is the keep-last sample: order events (created →
// paid → shipped or cancelled) with identical resends and out-of-order
// delivery, counted per status. Counting the events per status counts one
// order in several statuses; keep-last by order_id in event time, then a
// count per status applied from its changelog (+1 on +I/+U, −1 on -U/-D,
// changelog.CountPerKey), counts each order once, in its current status.
//
// Build reads JSON Lines events and writes the count per status, the naive
// count per status (every event counted), and optionally the changelog and
// each order's current status into a PostgreSQL table.
package orderstatus

import (
	"cmp"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beamdedup/beamdedup/pipelines/internal/pipeline"
	"github.com/beamdedup/beamdedup/pipelines/jsonl"
	"github.com/beamdedup/beamdedup/transforms/changelog"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/rowkind"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// Event is one status event of an order. Op is empty on input; the
// keep-last step writes each output row's changelog kind into it.
type Event struct {
	Op      string    `json:"op,omitempty" beam:"op"`
	OrderID string    `json:"order_id" beam:"order_id"`
	Status  string    `json:"status" beam:"status"`
	TS      time.Time `json:"ts" beam:"ts"`
}

func init() {
	beam.RegisterType(reflect.TypeFor[Event]())
	register.Function1x1(asInsert)
}

// Validate rejects events without the columns the pipeline needs.
func (e *Event) Validate() error {
	switch {
	case e.OrderID == "":
		return errors.New("missing order_id")
	case e.Status == "":
		return errors.New("missing status")
	case e.TS.IsZero():
		return errors.New("missing ts")
	}
	return nil
}

// Columns are the roles of Event's columns, stated once for the keep-last
// step, the count and the table: the key, the event time that orders an
// order's events, and the kind column the keep-last step writes.
var Columns = rowspec.Spec{Key: []string{"order_id"}, OnTime: "ts", Kind: "op"}

// UIDs of the pipeline's steps.
const (
	UID      = "order-status-keeplast" // the keep-last step
	CountUID = "status-counts"         // the count per status from the changelog
	NaiveUID = "naive-status-counts"   // the count per status of every event
)

// Config configures Build.
type Config struct {
	// Input is a file or glob of JSON Lines events (local or gs://).
	Input string
	// Output is the JSON Lines file of the count per status
	// (changelog.GroupCount, one row per status); empty writes nothing.
	Output string
	// Errors is the dead-letter file; empty means jsonl.ErrorsPath(Output).
	Errors string
	// Naive is the JSON Lines file of the naive count per status, every
	// event counted; empty writes nothing.
	Naive string
	// Changes is the JSON Lines file of the keep-last changelog; empty
	// writes nothing.
	Changes string
	// Stateful uses the streaming (stateful) expansions of keep-last and
	// of the count on a file too: the changelog then has a -U/+U pair for
	// every change, not only each order's final row (KeepLast's mini-batch
	// fold is off for it; Dedup may turn it back on).
	Stateful bool
	// Dedup options are passed to the keep-last step after its defaults.
	Dedup []dedup.Option
	// Postgres, when set, is the DSN of a PostgreSQL database into whose
	// Table (DefaultTable when empty; see CreateTable) each order's current
	// status is written from the keep-last changelog. Prefer a DSN without
	// its password (PGPASSWORD): the DSN travels in the pipeline.
	Postgres string
	Table    string
}

// Result holds the pipeline's collections.
type Result struct {
	Events      beam.PCollection // parsed input events (Event)
	Changes     beam.PCollection // the keep-last changelog (Event, Op set)
	Counts      beam.PCollection // the count's upsert stream (changelog.GroupCount)
	Final       beam.PCollection // the count per status: Counts' latest row per status
	Naive       beam.PCollection // the naive count per status (changelog.GroupCount)
	DeadLetters beam.PCollection // malformed lines and rejected rows (jsonl.ErrorLine)
}

// Build adds the order-status pipeline to s.
func Build(s beam.Scope, cfg Config) (Result, error) {
	r, err := build(s.Scope("OrderStatus"), cfg)
	if err != nil {
		return Result{}, fmt.Errorf("orderstatus: %w", err)
	}
	return r, nil
}

func build(s beam.Scope, cfg Config) (Result, error) {
	opts := slices.Concat([]dedup.Option{Columns, dedup.UID(UID)}, cfg.Dedup)
	var countOpts []changelog.Option
	if cfg.Stateful {
		// A file is one bundle, which KeepLast's mini-batch fold would
		// collapse to the final rows; the options given come after.
		opts = slices.Concat([]dedup.Option{dedup.MiniBatch(false)}, opts, []dedup.Option{dedup.AsStream()})
		countOpts = append(countOpts, changelog.AsStream())
	}
	countOpts = append(countOpts, Columns, changelog.GroupBy("status"))

	var r Result
	// Keep-last, then the count per status from its changelog, and the
	// naive count of every event beside it.
	step := func(s beam.Scope, events beam.PCollection) (beam.PCollection, beam.PCollection, error) {
		changes, rejected, err := pipeline.KeepLast(opts...)(s, events)
		if err != nil {
			return beam.PCollection{}, beam.PCollection{}, err
		}
		counts, err := changelog.TryCountPerKey(s, changes, append(slices.Clip(countOpts), changelog.UID(CountUID))...)
		if err != nil {
			return beam.PCollection{}, beam.PCollection{}, err
		}
		// The naive count: every event an insert, nothing deduplicated.
		inserts := beam.ParDo(s.Scope("AsInserts"), asInsert, events)
		naive, err := changelog.TryCountPerKey(s, inserts, append(slices.Clip(countOpts), changelog.UID(NaiveUID))...)
		if err != nil {
			return beam.PCollection{}, beam.PCollection{}, err
		}
		r.Changes, r.Counts = changes, counts.Counts
		r.Final = changelog.Latest(s.Scope("Final"), counts.Counts)
		r.Naive = changelog.Latest(s.Scope("Naive"), naive.Counts)
		dead := []beam.PCollection{rejected, counts.DeadLetters, naive.DeadLetters}
		if cfg.Postgres != "" {
			refused, err := writePostgres(s, changes, cfg.Postgres, cmp.Or(cfg.Table, DefaultTable))
			if err != nil {
				return beam.PCollection{}, beam.PCollection{}, err
			}
			dead = append(dead, refused)
		}
		return r.Final, beam.Flatten(s, dead...), nil
	}
	body, err := pipeline.Build(s, pipeline.Spec{
		Input: cfg.Input, Output: cfg.Output, Errors: cfg.Errors,
		Row: reflect.TypeFor[Event](), Step: step,
	})
	if err != nil {
		return Result{}, err
	}
	r.Events, r.DeadLetters = body.Rows, body.DeadLetters
	for _, o := range []struct {
		path string
		col  beam.PCollection
	}{{cfg.Naive, r.Naive}, {cfg.Changes, r.Changes}} {
		if o.path == "" {
			continue
		}
		if err := jsonl.CheckPath(o.path); err != nil {
			return r, fmt.Errorf("output: %w", err)
		}
		jsonl.Write(s.Scope("Write"), o.path, o.col)
	}
	return r, nil
}

func asInsert(e Event) Event {
	e.Op = rowkind.Insert.String()
	return e
}

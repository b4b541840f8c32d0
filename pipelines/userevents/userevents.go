// Package userevents is the spec's user_events table (user_id, event,
// rowtime) deduplicated in event-time mode: per user_id, the row with the
// smallest rowtime is kept and emitted once the watermark passes it, with
// rowtime as its Beam timestamp (spec section 4.1.2.2.1).
//
// On a file the earliest row per user comes out, whatever the order of
// the lines (KeepFirst's batch expansion, a minimum per key). On an
// unbounded source the watermark moves with the data, and a row that
// arrives after its user's row was emitted is dropped as late.
package userevents

import (
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamdedup/beamdedup/pipelines/internal/pipeline"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// UserEvent is one row of user_events.
type UserEvent struct {
	UserID  string    `json:"user_id" beam:"user_id"`
	Event   string    `json:"event" beam:"event"`
	Rowtime time.Time `json:"rowtime" beam:"rowtime"`
}

func init() { beam.RegisterType(reflect.TypeFor[UserEvent]()) }

// Validate rejects rows without a user_id or rowtime.
func (e *UserEvent) Validate() error {
	switch {
	case e.UserID == "":
		return errors.New("missing user_id")
	case e.Rowtime.IsZero():
		return errors.New("missing rowtime")
	}
	return nil
}

// UID is the default UID of the pipeline's KeepFirst.
const UID = "user-events-dedup"

// Config configures Build.
type Config struct {
	// Input is a file or glob of JSON Lines user events (local or gs://).
	Input string
	// Output is the JSON Lines file of the kept rows; empty writes nothing.
	Output string
	// Errors is the dead-letter file; empty means jsonl.ErrorsPath(Output).
	Errors string
	// Dedup options are applied after the defaults PartitionBy("user_id"),
	// OnTime("rowtime") and UID(UID).
	Dedup []dedup.Option
}

// Result holds the pipeline's collections.
type Result struct {
	Rows        beam.PCollection // parsed input rows (UserEvent)
	Deduped     beam.PCollection // the earliest row per user_id (UserEvent)
	DeadLetters beam.PCollection // jsonl.ErrorLine
}

// Build adds the user_events pipeline to s.
func Build(s beam.Scope, cfg Config) (Result, error) {
	opts := append([]dedup.Option{rowspec.PartitionBy("user_id"), rowspec.OnTime("rowtime"), dedup.UID(UID)}, cfg.Dedup...)
	r, err := pipeline.Build(s.Scope("UserEvents"), pipeline.Spec{
		Input: cfg.Input, Output: cfg.Output, Errors: cfg.Errors,
		Row:  reflect.TypeFor[UserEvent](),
		Step: pipeline.KeepFirst(opts...),
	})
	if err != nil {
		return Result{}, fmt.Errorf("userevents: %w", err)
	}
	return Result{Rows: r.Rows, Deduped: r.Out, DeadLetters: r.DeadLetters}, nil
}

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

// Config configures Build: the files, and KeepFirst options applied
// after the defaults PartitionBy("user_id"), OnTime("rowtime") and
// UID(UID).
type Config = pipeline.Config

// Result holds the pipeline's collections: the parsed UserEvents, the
// earliest row per user_id (Out), and the dead letters (jsonl.ErrorLine).
type Result = pipeline.Result

// Build adds the user_events pipeline to s.
func Build(s beam.Scope, cfg Config) (Result, error) {
	return pipeline.BuildKeepFirst(s, "UserEvents", cfg, reflect.TypeFor[UserEvent](), nil,
		rowspec.PartitionBy("user_id"), rowspec.OnTime("rowtime"), dedup.UID(UID))
}

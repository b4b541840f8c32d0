package dedup

import (
	"errors"
	"fmt"
	"time"

	"github.com/beamdedup/beamdedup/internal/rowcol"
	"github.com/beamdedup/beamdedup/internal/testhook"
	"github.com/beamdedup/beamdedup/transforms/dedup/internal/core"
	"github.com/beamdedup/beamdedup/transforms/internal/option"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// Option configures a transform of the family (KeepFirst, KeepLast,
// WindowFirst, WindowLast): the roles of the rows' columns, which package
// rowspec defines for every transform (rowspec.PartitionBy,
// rowspec.OnTime, rowspec.SequenceBy, rowspec.KindColumn, rowspec.Upsert,
// or a rowspec.Spec), and this package's settings (StateTTL, UID, ...).
// Options are applied in order; a later option of the same kind replaces
// an earlier one. Each option's doc says which transforms take it; the
// others reject it at construction. A mistake in an option (a nil Option,
// an empty column name, a negative duration) is a construction error that
// names the option.
type Option = rowspec.Option

// transform is which transform of the family a config builds.
type transform uint8

const (
	keepFirst transform = iota
	keepLast
	windowFirst
	windowLast
)

var transformNames = [...]string{"KeepFirst", "KeepLast", "WindowFirst", "WindowLast"}

func (t transform) String() string { return transformNames[t] }

// window reports whether t is window dedup.
func (t transform) window() bool { return t == windowFirst || t == windowLast }

type config struct {
	partitionBy  []string
	partitionSet bool
	partitionAll bool
	onTime       string
	sequenceBy   string
	stateTTL     time.Duration
	eventTTL     time.Duration
	resetOnDup   bool
	uid          string
	kindCol      string
	noMiniBatch  bool
	noOverlap    bool // a test's: each state request waited for in turn
	noCleanup    bool
	upsert       bool // KeepLast
	retract      bool // KeepLast: RetractOnExpiry
	dropped      bool // OutputDropped
	asStream     bool // AsStream
	buckets      int  // StateBuckets
	hooks        testhook.Dedup
	transform    transform
	errs         []error
	// set by StateTTL, EventTimeTTL, CleanupTimers: window dedup rejects
	// them whatever their value
	stateTTLSet, eventTTLSet, cleanupSet, bucketsSet bool
}

// own is an option of this package's transforms.
func own(name string, set func(*config)) Option {
	return option.Own("dedup."+name, set).(Option)
}

func init() {
	testhook.DedupOption = func(set func(*testhook.Dedup)) any {
		return own("a test hook", func(c *config) { set(&c.hooks) })
	}
}

// spec is the roles of the rows' columns the options name (the key as
// PartitionBy lists it).
func (c *config) spec() rowspec.Spec {
	return rowspec.Spec{Key: c.partitionBy, Kind: c.kindCol, OnTime: c.onTime, SequenceBy: c.sequenceBy}
}

// ordered reports whether an OnTime or SequenceBy value orders a key's
// rows (KeepLast: the largest wins), rather than arrival.
func (c *config) ordered() bool { return c.onTime != "" || c.sequenceBy != "" }

// dir is which end of a key's order the transform keeps.
func (c *config) dir() core.Direction {
	if c.transform == keepLast || c.transform == windowLast {
		return core.KeepLast
	}
	return core.KeepFirst
}

func defaultConfig() config { return config{resetOnDup: true} }

// newConfig applies opts to the defaults of transform t, recording the
// mistakes of each.
func newConfig(opts []Option, t transform) config {
	c := defaultConfig()
	c.transform = t
	var roles rowspec.Spec
	c.errs = option.Apply("dedup."+t.String(), opts, &roles, &c)
	c.partitionBy, c.partitionSet = roles.Key, len(roles.Key) > 0
	c.kindCol, c.onTime, c.sequenceBy, c.upsert = roles.Kind, roles.OnTime, roles.SequenceBy, roles.Upsert
	c.noOverlap = c.hooks.WaitEach
	return c
}

// fail records a mistake in an option.
func (c *config) fail(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf(format, args...))
}

// PartitionByAll makes every column of the row the key (but the kind
// column): exact-duplicate deduplication without listing the columns
// (rowspec.PartitionBy names them). A KV input is keyed by its key and
// takes neither.
func PartitionByAll() Option { return own("PartitionByAll", func(c *config) { c.partitionAll = true }) }

// StateTTL is the processing-time retention of a key's state. After it
// expires the next row of the key starts a new period and is emitted again.
// 0 (the default) keeps state forever: a key is emitted at most once.
// KeepFirst and KeepLast only.
func StateTTL(d time.Duration) Option {
	return own("StateTTL", func(c *config) { c.stateTTL, c.stateTTLSet = d, true })
}

// EventTimeTTL is an event-time retention: a key's period ends once the
// watermark passes its largest event time seen plus d, and a row whose event
// time is more than d after it starts a new period. It works on every
// runner, Flink included (no processing-time timers). With StateTTL too, a
// period ends when either retention ends. KeepFirst and KeepLast only.
func EventTimeTTL(d time.Duration) Option {
	return own("EventTimeTTL", func(c *config) { c.eventTTL, c.eventTTLSet = d, true })
}

// ResetTTLOnDuplicate sets whether a dropped +I/+U duplicate of an emitted
// key refreshes its retention (default true). False measures retention from
// the emitted row.
func ResetTTLOnDuplicate(reset bool) Option {
	return own("ResetTTLOnDuplicate", func(c *config) { c.resetOnDup = reset })
}

// UID names the transform's scope, so its step names, and with them its
// state, stay stable across pipeline versions (Dataflow update, Flink
// savepoints), and its counters can be read apart from another instance's
// (CountersOf). The default is the transform's name ("KeepFirst",
// "WindowLast", ...) within the enclosing scope; set a UID for any
// pipeline you will update.
func UID(uid string) Option {
	return own("UID", func(c *config) {
		if uid == "" {
			c.fail(`UID(""): the UID is empty; omit UID for the transform's default name`)
		}
		c.uid = uid
	})
}

// MiniBatch sets whether the keying step drops, before the shuffle, rows
// that cannot matter within a bundle (default true): on KeepFirst's
// stateful expansion later rows of a key already passed on in the bundle
// (not with EventTimeTTL); on bounded, globally windowed input it merges
// each key's rows in the bundle. KeepLast's stateful expansion, on globally
// windowed input without EventTimeTTL, folds each key's rows of a bundle to
// the one that decides its final state, so intermediate versions inside a
// bundle are not emitted. Final results are the same either way.
//
// With MiniBatch(false) every row reaches the stateful step, and KeepLast
// emits a change for each that changes its key, on every runner. Which
// rows those are depends on the order the runner hands a key's rows to the
// step, which no option sets: ordered by OnTime or SequenceBy, a row that
// arrives after a newer one is dropped as out of order. Flink, for one,
// deals a source's rows out to the keying step's parallel subtasks, so a
// key's rows need not reach the step in the source's order
// (docs/runners.md).
func MiniBatch(on bool) Option { return own("MiniBatch", func(c *config) { c.noMiniBatch = !on }) }

// AsStream expands KeepFirst and KeepLast on bounded input as on a stream:
// the stateful step, row by row, rather than a merge of each key's rows. A
// file then gives what a stream would: KeepFirst keeps each key's first row
// by arrival (in the order the runner hands a key its rows, which a file
// does not fix), not the row with its smallest timestamp; KeepLast emits
// the changelog of every change, not each key's final row as +I. It is how
// to try a pipeline's streaming expansion, its output and its cost, on a
// file before a stream (docs/keepfirst.md). Unbounded input always expands
// so; window dedup, which expands the same on both, rejects it.
func AsStream() Option { return own("AsStream", func(c *config) { c.asStream = true }) }

// StateBuckets sets how KeepFirst's and KeepLast's stateful expansion keeps
// its state: with n > 0, the states of all the keys whose hash falls in one
// of n buckets in one cell, with 0 a cell per key. Per bucket, a bundle
// reads each of its buckets once and writes what changed in one request,
// where per key it reads each key and writes each new one: a few requests
// per bundle instead of about two per row, which is what a stateful step
// costs on a portable runner. But a bucket is read whole: a bundle of a
// few rows reads all the keys of their buckets, so the layout pays where
// bundles hold many rows per bucket (a backlog, a high-rate stream, a
// file), and costs more than a cell per key where they hold a few rows over
// many stored keys. Without this option the expansion keeps bounded input
// (AsStream, EventTimeTTL) in 128 buckets and a stream per key. The layout
// and n are part of a running job's state: update or restore a job with
// the ones it ran with, or drain it (docs/state.md). Rows in the global
// window only, struct rows or KV (a KV's key is kept as the bytes of Beam's
// coder of K); KeepFirst and KeepLast only.
func StateBuckets(n int) Option {
	return own("StateBuckets", func(c *config) { c.buckets, c.bucketsSet = n, true })
}

// CleanupTimers sets whether KeepFirst and KeepLast set timers that delete
// idle state (default true). Expiry is checked when a row arrives either
// way, so the results are the same; without them the state of keys never
// seen again stays until its window ends. Turn them off on a runner
// without processing-time timers (Flink, for Go pipelines) when using
// StateTTL in watermarkless mode, and for a finite run of an unbounded
// source on Prism, which keeps the job alive until its processing-time
// timers fire (pipelines/streaming). A TestStream is different: its end
// does not wait for them, they fire only if the stream advances processing
// time past them (AdvanceProcessingTime). Bounded input sets none.
func CleanupTimers(on bool) Option {
	return own("CleanupTimers", func(c *config) { c.noCleanup, c.cleanupSet = !on, true })
}

// RetractOnExpiry sets whether KeepLast emits a -D of a key's last row when
// the key expires (StateTTL or EventTimeTTL; default false), so a
// downstream aggregate never keeps an expired row: from the cleanup timer,
// or when the key's next row arrives and finds it expired (then -D old, +I
// new). On a runner without processing-time timers (or with
// CleanupTimers(false)) only the on-arrival form happens. KeepLast only.
func RetractOnExpiry(on bool) Option {
	return own("RetractOnExpiry", func(c *config) { c.retract = on })
}

// OutputDropped makes Result.Dropped carry the input rows the transform
// drops, each as it came in (its kind included) with the timestamp the
// transform gave it (the OnTime column's, else its own): duplicates, late
// rows, replaced event-time candidates, swallowed changes, ignored
// retractions and, for KeepLast, superseded and out-of-order versions.
// Every input row then ends in exactly one of Rows (KeepLast: as the +I,
// +U or -D it caused), DeadLetters and Dropped, once its key's outcome is
// known; a pipeline that acknowledges its input per row (a Pub/Sub source)
// acknowledges the dropped rows there. Without it Dropped is not set.
//
// It costs nothing where a row is dropped by the stateful step or the
// mini-batch; on bounded input and in window dedup the rows of a key then
// meet in a GroupByKey instead of a combine (the combine keeps only the
// winner), which shuffles every row.
func OutputDropped() Option { return own("OutputDropped", func(c *config) { c.dropped = true }) }

// validate checks the options against each other and the transform.
func (c *config) validate() error {
	if len(c.errs) > 0 {
		return errors.Join(c.errs...)
	}
	if c.stateTTL < 0 {
		return fmt.Errorf("StateTTL(%v): it must be >= 0 (0 keeps state forever)", c.stateTTL)
	}
	if c.eventTTL < 0 {
		return fmt.Errorf("EventTimeTTL(%v): it must be >= 0 (0 disables it)", c.eventTTL)
	}
	if c.stateTTL > 0 && c.stateTTL < time.Millisecond {
		return fmt.Errorf("StateTTL(%v): below 1ms cannot be represented; use at least 1ms", c.stateTTL)
	}
	if c.eventTTL > 0 && c.eventTTL < time.Millisecond {
		return fmt.Errorf("EventTimeTTL(%v): below 1ms cannot be represented; use at least 1ms", c.eventTTL)
	}
	if c.buckets < 0 || c.buckets > maxStateBuckets {
		return fmt.Errorf("StateBuckets(%d): it must be from 0 (a cell per key) to %d", c.buckets, maxStateBuckets)
	}
	if err := c.validateLast(); err != nil {
		return err
	}
	if c.transform.window() {
		if err := c.validateWindow(); err != nil {
			return err
		}
	}
	if c.onTime != "" && c.kindCol != "" && c.transform == keepFirst {
		return fmt.Errorf("OnTime(%q) cannot be combined with KindColumn(%q): a watermark asserts no earlier row will come, while an update can invalidate that at any time; drop OnTime to deduplicate the changelog by arrival", c.onTime, c.kindCol)
	}
	if err := rowcol.Err(c.spec()); err != nil {
		return err // a column in two roles, a key column twice or empty
	}
	if c.partitionAll && c.partitionSet {
		return fmt.Errorf("PartitionByAll and PartitionBy(%q): each names the key; choose one", c.partitionBy)
	}
	if c.hooks.Clock != "" && !testhook.HasClock(c.hooks.Clock) {
		return fmt.Errorf("UseClock(%q): no clock registered under that name; call RegisterClock first", c.hooks.Clock)
	}
	return nil
}

// validateLast checks the KeepLast-only options.
func (c *config) validateLast() error {
	if c.transform != keepLast {
		switch {
		case c.upsert:
			return fmt.Errorf("Upsert is a KeepLast option: %v's output is insert-only", c.transform)
		case c.retract:
			return fmt.Errorf("RetractOnExpiry is a KeepLast option: %v emits nothing to retract", c.transform)
		}
		return nil
	}
	if c.kindCol == "" && !c.upsert {
		return fmt.Errorf("KeepLast emits -U/+U rows and needs a column to write their kind into: set KindColumn(column), or Upsert() for only the new rows")
	}
	if c.retract && c.kindCol == "" {
		return fmt.Errorf("RetractOnExpiry emits -D rows, which need a kind column: set KindColumn(column)")
	}
	if c.retract && c.stateTTL == 0 && c.eventTTL == 0 {
		return fmt.Errorf("RetractOnExpiry needs StateTTL or EventTimeTTL: without retention no key expires")
	}
	return nil
}

// validateWindow rejects the options window deduplication has no use for,
// each with the fix.
func (c *config) validateWindow() error {
	switch {
	case c.kindCol != "":
		return fmt.Errorf("KindColumn(%q): window deduplication takes insert-only input; deduplicate a changelog with KeepFirst or KeepLast", c.kindCol)
	case c.stateTTLSet || c.eventTTLSet:
		return fmt.Errorf("StateTTL/EventTimeTTL: window deduplication keeps a key's row only until its window closes, so there is no retention to set; choose the window size instead, or use KeepFirst/KeepLast for retention")
	case c.cleanupSet:
		return fmt.Errorf("CleanupTimers: window deduplication sets no timers (the runner drops a window's state when it closes); remove the option")
	case c.bucketsSet:
		return fmt.Errorf("StateBuckets: window deduplication keeps no per-row state (a combine per key and window); remove the option")
	case c.asStream:
		return fmt.Errorf("AsStream: window deduplication has no stateful expansion (a combine per key and window expands the same on a stream and on a file); remove the option, or use KeepFirst/KeepLast for per-row state")
	}
	return nil
}

package dedup

import (
	"errors"
	"fmt"
	"time"

	"github.com/beamdedup/beamdedup/transforms/dedup/internal/core"
	"github.com/beamdedup/beamdedup/transforms/internal/testhook"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// Option configures a transform of the family (KeepFirst, KeepLast,
// WindowFirst, WindowLast). Options are applied in order; a later option of
// the same kind replaces an earlier one. Each option's doc says which
// transforms take it; the others reject it at construction. A mistake in an
// option (a nil Option, an empty column name, a negative duration) is a
// construction error that names the option.
type Option func(*config)

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
	noOverlap    bool
	noCleanup    bool
	upsert       bool // KeepLast
	retract      bool // KeepLast: RetractOnExpiry
	dropped      bool // OutputDropped
	asStream     bool // AsStream
	hooks        testhook.Dedup
	transform    transform
	errs         []error
	// set by StateTTL, EventTimeTTL, CleanupTimers: window dedup rejects
	// them whatever their value
	stateTTLSet, eventTTLSet, cleanupSet, overlapSet bool
}

func init() {
	testhook.DedupOption = func(set func(*testhook.Dedup)) any {
		return Option(func(c *config) { set(&c.hooks) })
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
	for i, o := range opts {
		if o == nil {
			c.errs = append(c.errs, fmt.Errorf("option %d of %d is nil", i+1, len(opts)))
			continue
		}
		o(&c)
	}
	return c
}

// fail records a mistake in an option.
func (c *config) fail(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf(format, args...))
}

// column records a mistake when an option names the empty column.
func (c *config) column(option, col string) string {
	if col == "" {
		c.fail(`%s(""): the column name is empty`, option)
	}
	return col
}

// PartitionBy names the key columns (PARTITION BY): rows with equal values
// in all of them form one partition and keep one row. A nil pointer column
// is NULL; NULLs are equal to each other (GROUP BY semantics). Without
// PartitionBy the whole input is one partition, which runs on one key and
// so on one worker. A KV input is keyed by its key, and takes neither
// PartitionBy nor PartitionByAll.
func PartitionBy(columns ...string) Option {
	return func(c *config) {
		if len(columns) == 0 {
			c.fail("PartitionBy() needs at least one column; omit it for one global partition, or use PartitionByAll for every column")
		}
		// An empty name, a name twice: the roles' check (validate).
		c.partitionBy, c.partitionSet, c.partitionAll = columns, true, false
	}
}

// Spec states the roles of the rows' columns at once: Key as PartitionBy,
// Kind as KindColumn, OnTime and SequenceBy as those options, and Upsert as
// Upsert (an empty role sets nothing). A later option of the same kind
// replaces what it set. Result.Spec hands the roles on to the sink
// (pgsink.Spec).
func Spec(spec rowspec.Spec) Option {
	return func(c *config) {
		if len(spec.Key) > 0 {
			c.partitionBy, c.partitionSet, c.partitionAll = spec.Key, true, false
		}
		if spec.Kind != "" {
			c.kindCol = spec.Kind
		}
		if spec.OnTime != "" {
			c.onTime = spec.OnTime
		}
		if spec.SequenceBy != "" {
			c.sequenceBy = spec.SequenceBy
		}
		if spec.Upsert {
			c.upsert = true
		}
	}
}

// PartitionByAll makes every column of the row the key (but the kind
// column): exact-duplicate deduplication without listing the columns.
func PartitionByAll() Option {
	return func(c *config) { c.partitionAll, c.partitionBy, c.partitionSet = true, nil, false }
}

// OnTime turns on event-time mode: per key the row with the smallest event
// time in column is kept and emitted once the watermark reaches it. The
// column is a time.Time or int64 Unix milliseconds (or a pointer to one).
// Rows compare by its value at the column's precision: a time.Time to the
// microsecond (what a PostgreSQL timestamp keeps, so pgsink's guard agrees;
// nanoseconds within a microsecond tie), an int64 to the millisecond. The
// row's Beam timestamp is set from its millisecond, as are watermarks and
// timers. A nil pointer or a zero time.Time is no event time: the row is a
// dead letter. KeepLast and window dedup only order their rows by it.
func OnTime(column string) Option {
	return func(c *config) { c.onTime = c.column("OnTime", column) }
}

// SequenceBy orders a key's rows by column instead of arrival or event
// time: the largest value is the last, the smallest the first. The column
// is a signed or unsigned integer, a float (-0 equals 0; NaN is larger than
// every number), a time.Time (to the microsecond, as OnTime) or a string
// (byte order), or a pointer to one;
// a nil pointer is NULL, and such a row is dead-lettered with the reason
// "NULL sequence value". Ties fall back to the event time, then to the
// encoded row, so a rerun keeps the same rows. KeepFirst accepts it only
// where a key's rows are all seen before output (bounded input); on a
// stream use OnTime.
func SequenceBy(column string) Option {
	return func(c *config) { c.sequenceBy = c.column("SequenceBy", column) }
}

// StateTTL is the processing-time retention of a key's state. After it
// expires the next row of the key starts a new period and is emitted again.
// 0 (the default) keeps state forever: a key is emitted at most once.
// KeepFirst and KeepLast only.
func StateTTL(d time.Duration) Option {
	return func(c *config) { c.stateTTL, c.stateTTLSet = d, true }
}

// EventTimeTTL is an event-time retention: a key's period ends once the
// watermark passes its largest event time seen plus d, and a row whose event
// time is more than d after it starts a new period. It works on every
// runner, Flink included (no processing-time timers). With StateTTL too, a
// period ends when either retention ends. KeepFirst and KeepLast only.
func EventTimeTTL(d time.Duration) Option {
	return func(c *config) { c.eventTTL, c.eventTTLSet = d, true }
}

// ResetTTLOnDuplicate sets whether a dropped +I/+U duplicate of an emitted
// key refreshes its retention (default true). False measures retention from
// the emitted row.
func ResetTTLOnDuplicate(reset bool) Option { return func(c *config) { c.resetOnDup = reset } }

// UID names the transform's scope, so its step names, and with them its
// state, stay stable across pipeline versions (Dataflow update, Flink
// savepoints), and its counters can be read apart from another instance's
// (CountersOf). The default is the transform's name ("KeepFirst",
// "WindowLast", ...) within the enclosing scope; set a UID for any
// pipeline you will update.
func UID(uid string) Option {
	return func(c *config) {
		if uid == "" {
			c.fail(`UID(""): the UID is empty; omit UID for the transform's default name`)
		}
		c.uid = uid
	}
}

// KindColumn names the column that holds each row's kind: a string ("+I",
// "-U", "+U", "-D"; "" reads as +I) or a rowkind.Kind. The input's kinds are
// read from it, so the input may be a changelog (an updating input), and
// the output's kinds are written into it.
//
// KeepFirst emits the first +I/+U of a key with its kind set to +I and
// swallows every later change of the key; a -U/-D of an unseen key is
// ignored; it cannot be combined with OnTime. KeepLast writes +I, -U, +U
// and -D into it, and needs it unless Upsert is set. A row with an unknown
// kind is a dead letter. Window dedup takes insert-only input and rejects
// it.
func KindColumn(column string) Option {
	return func(c *config) { c.kindCol = c.column("KindColumn", column) }
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
func MiniBatch(on bool) Option { return func(c *config) { c.noMiniBatch = !on } }

// AsStream expands KeepFirst and KeepLast on bounded input as on a stream:
// the stateful step, row by row, rather than a merge of each key's rows. A
// file then gives what a stream would: KeepFirst keeps each key's first row
// by arrival (in the order the runner hands a key its rows, which a file
// does not fix), not the row with its smallest timestamp; KeepLast emits
// the changelog of every change, not each key's final row as +I. It is how
// to try a pipeline's streaming expansion, its output and its cost, on a
// file before a stream (docs/keepfirst.md). Unbounded input always expands
// so; window dedup, which expands the same on both, rejects it.
func AsStream() Option { return func(c *config) { c.asStream = true } }

// OverlapState sets whether the stateful step keeps several state requests
// in flight within a bundle (default true), rather than waiting for each
// in turn: without timers, on globally windowed input, it decides a bundle's
// rows in batches of up to 128 whose reads go out together; otherwise it
// waits for a row's read but not for its writes. Decisions and requests are
// the same either way, and every request is answered before the bundle
// finishes, and a key's outputs leave in the order they were decided in.
// A row's output may leave up to 127 rows later, or at its bundle's end,
// which is when the runner passes a bundle's output on anyway. KeepFirst
// and KeepLast only (docs/state.md).
func OverlapState(on bool) Option {
	return func(c *config) { c.noOverlap, c.overlapSet = !on, true }
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
	return func(c *config) { c.noCleanup, c.cleanupSet = !on, true }
}

// Upsert makes KeepLast emit no -U rows: each change is only the new last
// row (+I for a key's first, +U after), for sinks that upsert by the
// partition key. Deletes (-D) still need a KindColumn. KeepLast only.
func Upsert() Option { return func(c *config) { c.upsert = true } }

// RetractOnExpiry sets whether KeepLast emits a -D of a key's last row when
// the key expires (StateTTL or EventTimeTTL; default false), so a
// downstream aggregate never keeps an expired row: from the cleanup timer,
// or when the key's next row arrives and finds it expired (then -D old, +I
// new). On a runner without processing-time timers (or with
// CleanupTimers(false)) only the on-arrival form happens. KeepLast only.
func RetractOnExpiry(on bool) Option { return func(c *config) { c.retract = on } }

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
func OutputDropped() Option { return func(c *config) { c.dropped = true } }

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
	if err := c.spec().Err(); err != nil {
		return err // a column in two roles, a key column twice or empty
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
	case c.overlapSet:
		return fmt.Errorf("OverlapState: window deduplication keeps no per-row state (a combine per key and window); remove the option")
	case c.asStream:
		return fmt.Errorf("AsStream: window deduplication has no stateful expansion (a combine per key and window expands the same on a stream and on a file); remove the option, or use KeepFirst/KeepLast for per-row state")
	}
	return nil
}

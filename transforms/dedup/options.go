package dedup

import (
	"fmt"
	"time"

	"github.com/beamdedup/beamdedup/transforms/dedup/core"
)

// Option configures a transform of the family (KeepFirst, KeepLast,
// WindowFirst, WindowLast and their variants). Options are applied in
// order; a later option of the same kind replaces an earlier one. Each
// option's doc says which transforms take it; the others reject it at
// construction.
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
	partitionBy   []string
	partitionSet  bool
	partitionAll  bool
	onTime        string
	sequenceBy    string
	stateTTL      time.Duration
	eventTTL      time.Duration
	resetOnDup    bool
	uid           string
	changelogCol  string
	clock         string
	forceStateful bool
	noMiniBatch   bool
	noCleanup     bool
	outputKind    string // KeepLast
	upsert        bool   // KeepLast
	retract       bool   // KeepLast: RetractOnExpiry
	transform     transform
	errs          []error
	// set by StateTTL, EventTimeTTL, CleanupTimers: window dedup rejects
	// them whatever their value
	stateTTLSet, eventTTLSet, cleanupSet bool
}

// kindColumn is the column KeepLast writes output kinds into: OutputKind,
// else the Changelog column, else none.
func (c *config) kindColumn() string {
	if c.outputKind != "" {
		return c.outputKind
	}
	return c.changelogCol
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

// name is the transform's default name.
func (c *config) name(perKey bool) string {
	n := c.transform.String()
	if perKey {
		n += "PerKey"
	}
	return n
}

func defaultConfig() config { return config{resetOnDup: true} }

// PartitionBy names the key columns (PARTITION BY): rows with equal values
// in all of them form one partition and keep one row. A nil pointer column
// is NULL; NULLs are equal to each other (GROUP BY semantics). Without
// PartitionBy the whole input is one partition, which runs on one key and
// so on one worker.
func PartitionBy(columns ...string) Option {
	return func(c *config) {
		if len(columns) == 0 {
			c.errs = append(c.errs, fmt.Errorf("PartitionBy needs at least one column; omit it for one global partition, or use PartitionByAll for every column"))
		}
		c.partitionBy, c.partitionSet, c.partitionAll = columns, true, false
	}
}

// PartitionByAll makes every column of the row the key: exact-duplicate
// deduplication (spec section 4.1.3.4) without listing the columns.
func PartitionByAll() Option {
	return func(c *config) { c.partitionAll, c.partitionBy, c.partitionSet = true, nil, false }
}

// OnTime turns on event-time mode: per key the row with the smallest event
// time in column is kept and emitted once the watermark reaches it. The
// column is a time.Time or int64 Unix milliseconds (or a pointer to one);
// the row's Beam timestamp is set from it.
func OnTime(column string) Option { return func(c *config) { c.onTime = column } }

// SequenceBy orders a key's rows by column instead of arrival or event
// time: the largest value is the last, the smallest the first. The column
// is a signed or unsigned integer, a float (-0 equals 0; NaN is larger than
// every number), a time.Time or a string (byte order), or a pointer to one;
// a nil pointer is NULL, and such a row is dead-lettered with the reason
// "NULL sequence value". Ties fall back to the event time, then to the
// encoded row, so a rerun keeps the same rows. KeepFirst accepts it only
// where a key's rows are all seen before output (bounded input); on a
// stream use OnTime.
func SequenceBy(column string) Option { return func(c *config) { c.sequenceBy = column } }

// StateTTL is the processing-time retention of a key's state. After it
// expires the next row of the key starts a new period and is emitted again.
// 0 (the default) keeps state forever: a key is emitted at most once.
func StateTTL(d time.Duration) Option {
	return func(c *config) { c.stateTTL, c.stateTTLSet = d, true }
}

// EventTimeTTL is an event-time retention: a key's period ends once the
// watermark passes its largest event time seen plus d, and a row whose event
// time is more than d after it starts a new period. It works on every
// runner, Flink included (no processing-time timers). With StateTTL too, a
// period ends when either retention ends.
func EventTimeTTL(d time.Duration) Option {
	return func(c *config) { c.eventTTL, c.eventTTLSet = d, true }
}

// ResetTTLOnDuplicate sets whether a dropped +I/+U duplicate of an emitted
// key refreshes its retention (default true). False measures retention from
// the emitted row.
func ResetTTLOnDuplicate(reset bool) Option { return func(c *config) { c.resetOnDup = reset } }

// UID names the transform's scope, so its step names, and with them its
// state, stay stable across pipeline versions (Dataflow update, Flink
// savepoints). The default is the transform's name ("KeepFirst",
// "KeepLastPerKey", "WindowFirst", ...) within the enclosing scope; set a
// UID for any pipeline you will update.
func UID(uid string) Option { return func(c *config) { c.uid = uid } }

// Changelog declares an updating input whose row kind is in column: a
// string ("+I", "-U", "+U", "-D") or a rowkind.Kind. The first +I/+U of a
// key is emitted with its kind set to +I; every later change of the key is
// swallowed; a -U/-D of an unseen key is ignored. A row with an unknown kind
// is dead-lettered. Not allowed with OnTime.
func Changelog(kindColumn string) Option { return func(c *config) { c.changelogCol = kindColumn } }

// ForceStateful keeps the stateful streaming expansion even on bounded
// input. It exists for tests and benchmarks that compare the expansions.
func ForceStateful() Option { return func(c *config) { c.forceStateful = true } }

// MiniBatch sets whether the keying step drops, before the shuffle, rows
// that cannot matter within a bundle (default true): on KeepFirst's
// stateful expansion later rows of a key already passed on in the bundle
// (not with EventTimeTTL); on bounded, globally windowed input it merges
// each key's rows in the bundle. KeepLast's stateful expansion, on globally
// windowed input without EventTimeTTL, folds each key's rows of a bundle to
// the one that decides its final state, so intermediate versions inside a
// bundle are not emitted. Final results are the same either way.
func MiniBatch(on bool) Option { return func(c *config) { c.noMiniBatch = !on } }

// CleanupTimers sets whether KeepFirst and KeepLast set timers that delete
// idle state (default true). Expiry is checked when a row arrives either way, so the
// results are the same; without them the state of keys never seen again
// stays until its window ends. Turn them off for a finite streaming run on
// Prism (which keeps a job alive until its processing-time timers fire) or
// on a runner without processing-time timers (Flink, for Go pipelines) when
// using StateTTL in watermarkless mode.
func CleanupTimers(on bool) Option {
	return func(c *config) { c.noCleanup, c.cleanupSet = !on, true }
}

// OutputKind names the column (a string or a rowkind.Kind) into which
// KeepLast writes each output row's kind: +I, -U, +U or -D. It defaults to
// the Changelog column. KeepLast needs one of them, or Upsert. KeepLast only.
func OutputKind(column string) Option { return func(c *config) { c.outputKind = column } }

// Upsert makes KeepLast emit no -U rows: each change is only the new last
// row (+I for a key's first, +U after), for sinks that upsert by the
// partition key. Deletes (-D) still need a kind column. KeepLast only.
func Upsert() Option { return func(c *config) { c.upsert = true } }

// RetractOnExpiry sets whether KeepLast emits a -D of a key's last row when
// the key expires (StateTTL or EventTimeTTL; default false), so a
// downstream aggregate never keeps an expired row: from the cleanup timer,
// or when the key's next row arrives and finds it expired (then -D old, +I
// new). On a runner without processing-time timers (or with
// CleanupTimers(false)) only the on-arrival form happens. KeepLast only.
func RetractOnExpiry(on bool) Option { return func(c *config) { c.retract = on } }

// UseClock reads processing time from a clock registered under name with
// RegisterClock, instead of the wall clock. For tests only.
func UseClock(name string) Option { return func(c *config) { c.clock = name } }

// validateLast checks the KeepLast-only options.
func (c *config) validateLast() error {
	if c.transform != keepLast {
		switch {
		case c.outputKind != "":
			return fmt.Errorf("OutputKind(%q) is a KeepLast option: %v's output is insert-only", c.outputKind, c.transform)
		case c.upsert:
			return fmt.Errorf("Upsert is a KeepLast option: %v's output is insert-only", c.transform)
		case c.retract:
			return fmt.Errorf("RetractOnExpiry is a KeepLast option: %v emits nothing to retract", c.transform)
		}
		return nil
	}
	if c.outputKind != "" && c.changelogCol != "" && c.outputKind != c.changelogCol {
		return fmt.Errorf("OutputKind(%q) differs from Changelog(%q): the output kind is written into the input's kind column; drop OutputKind", c.outputKind, c.changelogCol)
	}
	if c.kindColumn() == "" && !c.upsert {
		return fmt.Errorf("KeepLast emits -U/+U rows and needs a column to write their kind into: set OutputKind(column) (or Changelog), or Upsert() for only the new rows")
	}
	if c.retract && c.kindColumn() == "" {
		return fmt.Errorf("RetractOnExpiry emits -D rows, which need a kind column: set OutputKind(column)")
	}
	if c.retract && c.stateTTL == 0 && c.eventTTL == 0 {
		return fmt.Errorf("RetractOnExpiry needs StateTTL or EventTimeTTL: without retention no key expires")
	}
	return nil
}

func (c *config) validate() error {
	if len(c.errs) > 0 {
		return c.errs[0]
	}
	if c.stateTTL < 0 {
		return fmt.Errorf("StateTTL must be >= 0 (0 keeps state forever), got %v", c.stateTTL)
	}
	if c.eventTTL < 0 {
		return fmt.Errorf("EventTimeTTL must be >= 0 (0 disables it), got %v", c.eventTTL)
	}
	if c.stateTTL > 0 && c.stateTTL < time.Millisecond {
		return fmt.Errorf("StateTTL below 1ms (%v) cannot be represented; use at least 1ms", c.stateTTL)
	}
	if c.eventTTL > 0 && c.eventTTL < time.Millisecond {
		return fmt.Errorf("EventTimeTTL below 1ms (%v) cannot be represented; use at least 1ms", c.eventTTL)
	}
	if err := c.validateLast(); err != nil {
		return err
	}
	if c.onTime != "" && c.changelogCol != "" && c.transform == keepFirst {
		return fmt.Errorf("OnTime(%q) cannot be combined with Changelog(%q): a watermark asserts no earlier row will come, while an update can invalidate that at any time; drop OnTime to deduplicate the changelog by arrival", c.onTime, c.changelogCol)
	}
	seen := map[string]bool{}
	for _, col := range c.partitionBy {
		if seen[col] {
			return fmt.Errorf("PartitionBy names column %q twice; list each key column once", col)
		}
		seen[col] = true
	}
	if c.clock != "" {
		if _, ok := lookupClock(c.clock); !ok {
			return fmt.Errorf("UseClock(%q): no clock registered under that name; call RegisterClock first", c.clock)
		}
	}
	return nil
}

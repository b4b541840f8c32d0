// Package flinkopts holds the options of Beam's Flink runner that the
// project's commands and tests set on a Go job: checkpointing, max
// parallelism, the state backend, the savepoint to restore, streaming
// mode. Beam Go (v2.77.0) sends a Java job server only --parallelism of
// those (notes/beam-defects.md, 18); the project's job server lifts each
// Go option named after a runner option into the runner's options
// (docs/flink-jobserver.md): runjob registers these as flags (Register),
// jobrun sets them for one job (jobrun.Options.Flink).
package flinkopts

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Options are the Flink runner options of a job. The zero value of each
// leaves the job server's default (cmd/flinkjobserver: a checkpoint every
// 5 s for a job in streaming mode, bundles finished before each
// checkpoint), else the runner's or the cluster's.
type Options struct {
	// MaxParallelism pins the key groups of keyed state: a savepoint can
	// be restored at any parallelism up to it (rescaling keeps each key's
	// state). Set it before the first run: Flink derives a default from
	// the parallelism, and a restore must use the same.
	MaxParallelism int
	// CheckpointingInterval is the interval of the job's checkpoints
	// (streaming mode only); NoCheckpoints: none, whatever the job
	// server's default.
	CheckpointingInterval time.Duration
	// CheckpointingMode is EXACTLY_ONCE (Flink's default) or
	// AT_LEAST_ONCE.
	CheckpointingMode string
	// StateBackend is rocksdb or filesystem (the heap, as Flink's
	// hashmap), with StateBackendStoragePath its checkpoint directory (a
	// URI); empty: the cluster's state.backend.type.
	StateBackend            string
	StateBackendStoragePath string
	// SavepointPath is a savepoint (or retained checkpoint) to restore the
	// job from; AllowNonRestoredState lets a job start from it although
	// some of its state belongs to no operator of the job.
	SavepointPath         string
	AllowNonRestoredState bool
	// Streaming runs a bounded pipeline in streaming mode (Flink runs it
	// in batch mode otherwise, with no checkpoints).
	Streaming bool
	// FinishBundleBeforeCheckpointing finishes each bundle before a
	// checkpoint's barrier passes; nil: the job server's default (true for
	// a Go job: without it a splittable source may never start once
	// checkpoints are on, notes/beam-defects.md).
	FinishBundleBeforeCheckpointing *bool
}

// NoCheckpoints as Options.CheckpointingInterval turns checkpoints off
// (--checkpointing_interval=0 on the command line).
const NoCheckpoints time.Duration = -1

// option is one row of the table: a flag, the Java option it sets and the
// field it reads.
type option struct {
	name, usage string
	value       func(*Options) flag.Value
}

var table = []option{
	{"max_parallelism", "Flink: the max parallelism (key groups) of the job's keyed state; keep it across restores", func(o *Options) flag.Value { return (*intValue)(&o.MaxParallelism) }},
	{"checkpointing_interval", "Flink: checkpoint this often (e.g. 5s); 0: no checkpoints; unset: the job server's default", func(o *Options) flag.Value { return (*millis)(&o.CheckpointingInterval) }},
	{"checkpointing_mode", "Flink: EXACTLY_ONCE (default) or AT_LEAST_ONCE", func(o *Options) flag.Value { return str{&o.CheckpointingMode, strings.ToUpper} }},
	{"state_backend", "Flink: rocksdb or filesystem; empty: the cluster's state.backend.type", func(o *Options) flag.Value { return str{&o.StateBackend, strings.ToLower} }},
	{"state_backend_storage_path", "Flink: the state backend's checkpoint directory (a URI), with --state_backend", func(o *Options) flag.Value { return str{p: &o.StateBackendStoragePath} }},
	{"savepoint_path", "Flink: restore the job from this savepoint or retained checkpoint", func(o *Options) flag.Value { return str{p: &o.SavepointPath} }},
	{"allow_non_restored_state", "Flink: start from --savepoint_path even if some of its state maps to no operator", func(o *Options) flag.Value { return (*boolValue)(&o.AllowNonRestoredState) }},
	{"streaming", "Flink: run a bounded pipeline in streaming mode (checkpoints, no batch translation)", func(o *Options) flag.Value { return (*boolValue)(&o.Streaming) }},
	{"finish_bundle_before_checkpointing", "Flink: finish each bundle before a checkpoint (unset: the job server's default, true for a Go job)", func(o *Options) flag.Value { return optBool{&o.FinishBundleBeforeCheckpointing} }},
}

// Register defines a flag for each option on fs and returns the options
// they set. On flag.CommandLine, a job's flags reach the runner as they
// are: Beam sends every flag set among its Go options.
func Register(fs *flag.FlagSet) *Options {
	o := &Options{}
	for _, op := range table {
		fs.Var(op.value(o), op.name, op.usage)
	}
	return o
}

// Values are the options set, as the Go options that carry them: each by
// its name, in the runner's format (milliseconds, -1 for no checkpoints,
// true or false).
func (o Options) Values() map[string]string {
	out := map[string]string{}
	for _, op := range table {
		if s := op.value(&o).String(); s != "" {
			out[op.name] = s
		}
	}
	return out
}

// Check says what is wrong with the options, naming the flag.
func (o Options) Check() error {
	switch o.CheckpointingMode {
	case "", "EXACTLY_ONCE", "AT_LEAST_ONCE":
	default:
		return fmt.Errorf("--checkpointing_mode=%s: want EXACTLY_ONCE or AT_LEAST_ONCE", o.CheckpointingMode)
	}
	switch o.StateBackend {
	case "", "rocksdb", "filesystem":
	default:
		return fmt.Errorf("--state_backend=%s: want rocksdb or filesystem (Beam's Flink runner knows no other)", o.StateBackend)
	}
	if o.StateBackend != "" && o.StateBackendStoragePath == "" {
		return fmt.Errorf("--state_backend=%s needs --state_backend_storage_path (a URI, file:///... on this machine)", o.StateBackend)
	}
	if (o.CheckpointingInterval < 0 && o.CheckpointingInterval != NoCheckpoints) || (o.CheckpointingInterval > 0 && o.CheckpointingInterval < time.Millisecond) {
		return fmt.Errorf("--checkpointing_interval=%v: want a positive duration of at least 1ms, such as 5s (or 0: none)", o.CheckpointingInterval)
	}
	if o.MaxParallelism < 0 || o.MaxParallelism > 32768 {
		return fmt.Errorf("--max_parallelism=%d: want 1..32768 (Flink's limit)", o.MaxParallelism)
	}
	return nil
}

// millis is a duration flag that prints itself in milliseconds, the
// runner's unit, and NoCheckpoints as -1, the runner's "none"; it accepts a
// Go duration (5s) or milliseconds (5000), 0 for none.
type millis time.Duration

func (m *millis) String() string {
	switch {
	case m == nil || *m == 0:
		return ""
	case time.Duration(*m) == NoCheckpoints:
		return "-1"
	}
	return strconv.FormatInt(time.Duration(*m).Milliseconds(), 10)
}

func (m *millis) Set(s string) error {
	d, err := time.ParseDuration(s)
	if n, nerr := strconv.ParseInt(s, 10, 64); nerr == nil {
		d, err = time.Duration(n)*time.Millisecond, nil
	}
	if err != nil {
		return fmt.Errorf("not a duration; want one such as 5s or 500ms (or milliseconds), 0 for none")
	}
	if d <= 0 {
		d = NoCheckpoints
	}
	*m = millis(d)
	return nil
}

type intValue int

func (v *intValue) String() string {
	if v == nil || *v == 0 {
		return ""
	}
	return strconv.Itoa(int(*v))
}

func (v *intValue) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("not a whole number")
	}
	*v = intValue(n)
	return nil
}

type boolValue bool

func (v *boolValue) String() string {
	if v == nil || !*v {
		return ""
	}
	return "true"
}

func (v *boolValue) Set(s string) error {
	b, err := strconv.ParseBool(s)
	*v = boolValue(b)
	return err
}

func (v *boolValue) IsBoolFlag() bool { return true }

// optBool is a boolean flag that is unset until set: it prints nothing
// then, and true or false once set.
type optBool struct{ p **bool }

func (v optBool) String() string {
	if v.p == nil || *v.p == nil {
		return ""
	}
	return strconv.FormatBool(**v.p)
}

func (v optBool) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	*v.p = &b
	return nil
}

func (v optBool) IsBoolFlag() bool { return true }

// str is a string flag, its value passed through conv when set (nil: as
// given).
type str struct {
	p    *string
	conv func(string) string
}

func (v str) String() string {
	if v.p == nil {
		return ""
	}
	return *v.p
}

func (v str) Set(s string) error {
	if v.conv != nil {
		s = v.conv(s)
	}
	*v.p = s
	return nil
}

package jobrun

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Sample is one observation of a job. Any change in Counters counts as
// progress. Pending says that input remains (say unacked messages); while
// it is false no stall is reported: an idle job is not stalled.
//
// Stages, when given, are watched one by one as well: a stage that holds
// work (Waiting > 0) and finishes none of it (Done unchanged) for the
// limit stalls, so that a source that keeps reading does not hide a step
// after it that stopped.
type Sample struct {
	Counters map[string]int64
	Pending  bool
	Stages   []Stage
	// Note says what is not happening, for the Stall message ("no bundle
	// finished"); empty: "no progress ... while input remains".
	Note string
	// Live names the job's live source ("Pub/Sub source"), whose bundles
	// commit every few seconds whether or not it has anything to read. A
	// followed job's watchdog then adds a stage for it (Stage.Always) that
	// moves with every committed bundle: a job of which nothing commits
	// for the limit is stalled (a frozen SDK worker in another process
	// shows no other way). Leave it empty once the source is asked to stop.
	Live string
}

// Stage is one step of the job as the caller can count it.
type Stage struct {
	// Name says what the stage does and in what unit, for the message
	// ("KeepFirst: rows decoded and not yet deduplicated").
	Name string
	// Waiting is the work handed to the stage and not finished yet.
	Waiting int64
	// Done is a running total of finished work; any change is progress.
	Done int64
	// Always: the stage always holds work, whatever Waiting says (a live
	// source holds its subscription): Done not moving for the limit
	// stalls it.
	Always bool
}

// holding reports whether the stage holds work.
func (st Stage) holding() bool { return st.Always || st.Waiting > 0 }

// Config configures Watch. Limit and Sample are required.
type Config struct {
	// Limit is how long nothing may move while input remains.
	Limit time.Duration
	// Every is the sampling interval (default Limit/10, at least 10ms).
	Every time.Duration
	// Sample observes the job. An error is kept as the last observation's
	// note and counts as no progress.
	Sample func(context.Context) (Sample, error)
	// What names the job in the Stall message (default "job").
	What string
	// Hint is appended to the Stall message (where to read more).
	Hint string

	// Ticker and Now replace the clock in tests. Ticker returns a channel
	// that delivers ticks and a stop function.
	Ticker func(time.Duration) (<-chan time.Time, func())
	Now    func() time.Time
}

// Stall is the error Watch returns when the job stopped moving.
type Stall struct {
	What     string
	For      time.Duration // how long nothing moved
	Counters map[string]int64
	LastErr  error // the last sampling error, if any
	Hint     string
	// Stage is the stage that stalled (zero when the whole job did): its
	// name and the work it held when last seen.
	Stage Stage
	// Note is the last good sample's Note.
	Note string
}

func (e *Stall) Error() string {
	var b strings.Builder
	if e.Stage.Always {
		fmt.Fprintf(&b, "%s stalled: %s: no bundle committed for %v, though a live source commits one every few seconds, with or without input", e.What, e.Stage.Name, e.For.Round(time.Second))
	} else if e.Stage.Name != "" {
		fmt.Fprintf(&b, "%s stalled: %s: %d waiting, none finished for %v", e.What, e.Stage.Name, e.Stage.Waiting, e.For.Round(time.Second))
	} else if e.Note != "" {
		fmt.Fprintf(&b, "%s stalled: %s for %v", e.What, e.Note, e.For.Round(time.Second))
	} else {
		fmt.Fprintf(&b, "%s stalled: no progress for %v while input remains", e.What, e.For.Round(time.Second))
	}
	if len(e.Counters) > 0 {
		var kv []string
		for _, k := range slices.Sorted(maps.Keys(e.Counters)) {
			kv = append(kv, fmt.Sprintf("%s=%d", k, e.Counters[k]))
		}
		fmt.Fprintf(&b, " (%s)", strings.Join(kv, ", "))
	}
	if e.LastErr != nil {
		fmt.Fprintf(&b, "; last sample failed: %v", e.LastErr)
	}
	if e.Hint != "" {
		b.WriteString("; ")
		b.WriteString(e.Hint)
	}
	return b.String()
}

// Watch samples until ctx is done (it then returns nil) or the job stalls
// (it returns a *Stall). Run it next to the job and cancel the job with
// its result.
func Watch(ctx context.Context, cfg Config) error {
	if cfg.Limit <= 0 || cfg.Sample == nil {
		return fmt.Errorf("jobrun: Watch needs Limit and Sample")
	}
	if cfg.Every <= 0 {
		cfg.Every = max(cfg.Limit/10, 10*time.Millisecond)
	}
	cfg.What = cmp.Or(cfg.What, "job")
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Ticker == nil {
		cfg.Ticker = func(d time.Duration) (<-chan time.Time, func()) {
			t := time.NewTicker(d)
			return t.C, t.Stop
		}
	}
	ticks, stop := cfg.Ticker(cfg.Every)
	defer stop()

	var last map[string]int64
	var lastErr error
	var note string
	moved := cfg.Now()
	type seen struct {
		Stage
		moved time.Time
	}
	var stages []seen // by position in Sample.Stages
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticks:
		}
		s, err := cfg.Sample(ctx)
		if ctx.Err() != nil {
			return nil
		}
		now := cfg.Now()
		lastErr = err
		if err == nil {
			if !maps.Equal(s.Counters, last) || !s.Pending {
				moved = now
			}
			last, note = s.Counters, s.Note
			if len(s.Stages) != len(stages) {
				stages = make([]seen, len(s.Stages))
				for i := range stages {
					stages[i].moved = now
				}
			}
			for i, st := range s.Stages {
				if !st.holding() || st.Done != stages[i].Done || st.Name != stages[i].Name {
					stages[i].moved = now
				}
				stages[i].Stage = st
			}
		}
		for _, st := range stages {
			if idle := now.Sub(st.moved); st.holding() && idle >= cfg.Limit {
				return &Stall{What: cfg.What, For: idle, Counters: last, LastErr: lastErr, Hint: cfg.Hint, Stage: st.Stage, Note: note}
			}
		}
		if idle := now.Sub(moved); idle >= cfg.Limit {
			return &Stall{What: cfg.What, For: idle, Counters: last, LastErr: lastErr, Hint: cfg.Hint, Note: note}
		}
	}
}

package unbounded

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"
)

// Config is what the two sources' options set alike: a reader's bundle
// budget, its idle stop, its watermark lag and its Control, with the
// bookkeeping of every option (Record). A source package's config embeds
// it; its defaults are the package's.
type Config struct {
	Record

	MaxBundle    time.Duration
	MaxElements  int
	IdleStop     time.Duration
	WatermarkLag time.Duration
	control      string
}

// Apply applies opts to c and records the nil ones in c's Record.
func Apply[C any, O ~func(*C)](c *C, rec *Record, opts []O) {
	for i, o := range opts {
		if o == nil {
			rec.NilOption(i, len(opts))
			continue
		}
		o(c)
	}
}

// SetMaxBundle is the option MaxBundleDuration.
func (c *Config) SetMaxBundle(d time.Duration) {
	c.setDuration(&c.MaxBundle, "MaxBundleDuration", d, 1, "a positive duration")
}

// setDuration records the option name, refusing a d under least, and
// sets *p to d.
func (c *Config) setDuration(p *time.Duration, name string, d, least time.Duration, want string) {
	c.Set(name)
	if d < least {
		c.Errorf("%s(%v): want %s", name, d, want)
	}
	*p = d
}

// SetMaxElements is the option named option (MaxBundleRecords,
// MaxBundleMessages).
func (c *Config) SetMaxElements(option string, n int) {
	c.Set(option)
	if n <= 0 {
		c.Errorf("%s(%d): want a positive number", option, n)
	}
	c.MaxElements = n
}

// SetIdleStop is the option IdleStop.
func (c *Config) SetIdleStop(d time.Duration) {
	c.setDuration(&c.IdleStop, "IdleStop", d, 0, "0 (read forever) or a positive duration")
}

// SetWatermarkLag is the option WatermarkLag.
func (c *Config) SetWatermarkLag(d time.Duration) {
	c.setDuration(&c.WatermarkLag, "WatermarkLag", d, 0, "0 or a positive duration")
}

// ControlOptionName is the name under which the control option is
// recorded: a source's Read takes it, the other transforms refuse it.
const ControlOptionName = "control"

// SetControl is the option that attaches a Control (ControlOption).
func (c *Config) SetControl(ctl *Control) {
	c.Set(ControlOptionName)
	if ctl == nil {
		c.Errorf("a nil control")
		return
	}
	c.control = ctl.id
}

// Reading are the settings Config gives a reader, as its DoFn carries
// them (exported: the runner serializes the DoFn).
type Reading struct {
	MaxBundleMs    int64
	MaxElements    int
	IdleStopMs     int64
	WatermarkLagMs int64
	// Control is the id of the Control in the submitting process; empty:
	// none.
	Control string
	// RunID names the Read's run in a worker process, what the readers
	// of one Read share there: the Control's id, else one made at
	// construction.
	RunID string
}

// Reading returns the readers' settings.
func (c *Config) Reading() Reading {
	run := c.control
	if run == "" {
		var b [8]byte
		rand.Read(b[:])
		run = "read-" + hex.EncodeToString(b[:])
	}
	return Reading{MaxBundleMs: c.MaxBundle.Milliseconds(), MaxElements: c.MaxElements, IdleStopMs: c.IdleStop.Milliseconds(),
		WatermarkLagMs: c.WatermarkLag.Milliseconds(), Control: c.control, RunID: run}
}

// IdleStopAfter is IdleStop, 0 for none.
func (r Reading) IdleStopAfter() time.Duration { return time.Duration(r.IdleStopMs) * time.Millisecond }

// Lag is WatermarkLag.
func (r Reading) Lag() time.Duration { return time.Duration(r.WatermarkLagMs) * time.Millisecond }

// A Bundle is one bundle of a reader: its budget of time and elements,
// its Control (nil: none in this process) and its watermark.
type Bundle struct {
	r        Reading
	deadline time.Time
	spent    int // elements of the budget: claimed, emitted or not
	emitted  int
	ctl      *Control
	we       *Watermark
}

// Start starts a bundle of a reader of what ("topic t"), whose Control
// lookup warns once per *warned when the Control is in another process.
func (r Reading) Start(ctx context.Context, we *Watermark, what string, warned *bool) *Bundle {
	return &Bundle{r: r, deadline: time.Now().Add(time.Duration(r.MaxBundleMs) * time.Millisecond),
		ctl: LookupControl(ctx, r.Control, what, warned), we: we}
}

// Control is the bundle's Control, nil when there is none in this process
// (its methods then do nothing).
func (b *Bundle) Control() *Control { return b.ctl }

// More reports whether the bundle has elements and time left.
func (b *Bundle) More() bool { return b.spent < b.r.MaxElements && time.Now().Before(b.deadline) }

// Left is how many more elements the bundle may claim.
func (b *Bundle) Left() int { return b.r.MaxElements - b.spent }

// Spent is how many elements the bundle claimed.
func (b *Bundle) Spent() int { return b.spent }

// Deadline is when the bundle's time is spent.
func (b *Bundle) Deadline() time.Time { return b.deadline }

// Emitted is the number of elements the bundle emitted.
func (b *Bundle) Emitted() int { return b.emitted }

// Claim counts n elements the reader is about to emit, in the bundle's
// budget and live in the Control (before the emit, which may block in
// fused steps).
func (b *Bundle) Claim(n int) {
	b.Spend(n)
	b.emitted += n
	b.ctl.Claimed(n)
}

// Spend counts n elements the reader claimed and does not emit (a
// redelivery it absorbed) in the bundle's budget.
func (b *Bundle) Spend(n int) { b.spent += n }

// StopRequested reports whether the Control asked the readers to end.
func (b *Bundle) StopRequested() bool { return b.ctl.Requested() }

// Idle reports whether IdleStop has passed since last, when the reader
// last received an element.
func (b *Bundle) Idle(last time.Time) bool {
	d := b.r.IdleStopAfter()
	return d > 0 && time.Since(last) >= d
}

// CaughtUp moves the watermark to the wall clock less the lag: the reader
// has read everything there is.
func (b *Bundle) CaughtUp() { b.we.UpdateWatermark(time.Now().Add(-b.r.Lag())) }

// Advance moves the watermark to t less the lag (the newest event time
// read), never ahead of it.
func (b *Bundle) Advance(t time.Time) { b.we.UpdateWatermark(t.Add(-b.r.Lag())) }

// Watermark moves the watermark to t as it is.
func (b *Bundle) Watermark(t time.Time) { b.we.UpdateWatermark(t) }

// Ended counts the reader as ended in its Control.
func (b *Bundle) Ended() { b.ctl.ReaderEnded() }

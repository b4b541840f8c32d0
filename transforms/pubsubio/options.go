package pubsubio

import (
	"time"

	"github.com/beamdedup/beamdedup/internal/unbounded"
)

// Option configures Read, Write and Ack (and ReadNative). Each option's
// doc says which of them take it; the others refuse it. A nil option, an
// empty name or a value out of range is recorded, and TryRead, TryWrite
// and TryAck return every such error at once (Read, Write and Ack panic
// with them).
type Option func(*config)

// config is what the options set: the reading settings both sources
// share and the option bookkeeping (unbounded.Config), and Pub/Sub's own.
type config struct {
	unbounded.Config

	endpoint           string
	idAttribute        string
	timestampAttribute string
	ackDeadline        time.Duration
	readers            int
	disableLease       bool
	publishBatch       int
}

// The options each transform takes.
var (
	readOptions = []string{"Endpoint", "IDAttribute", "TimestampAttribute", "AckDeadline", "MaxBundleDuration",
		"MaxBundleMessages", "IdleStop", "Readers", "WatermarkLag", unbounded.ControlOptionName, "withoutLease"}
	nativeReadOptions = []string{"IDAttribute", "TimestampAttribute"}
	writeOptions      = []string{"Endpoint", "publishBatch"}
	ackOptions        = []string{"Endpoint"}
)

// newConfig applies opts for transform (its name in errors), which takes
// the options named in allowed; more, when not nil, are errors of the
// transform's own arguments, reported with the options'.
func newConfig(transform string, allowed []string, opts []Option, more ...error) (config, error) {
	c := config{
		Config:       unbounded.Config{MaxBundle: time.Second, MaxElements: 5000, WatermarkLag: 2 * time.Second},
		ackDeadline:  60 * time.Second,
		readers:      1,
		publishBatch: 500,
	}
	unbounded.Apply(&c, &c.Record, opts)
	return c, c.Check(transform, allowed, more...)
}

// Endpoint connects to an emulator (host:port) without TLS or credentials.
// Without it the client uses PUBSUB_EMULATOR_HOST when set, else Google's
// endpoint with application default credentials. Read, Write and Ack.
func Endpoint(hostPort string) Option {
	return func(c *config) {
		c.Set("Endpoint")
		if hostPort == "" {
			c.Errorf("Endpoint(\"\"): want host:port (leave the option out for PUBSUB_EMULATOR_HOST or Google's Pub/Sub)")
		}
		c.endpoint = hostPort
	}
}

// IDAttribute names the attribute that carries a publisher-assigned message
// id; Message.ID takes its value, so publisher retries share one ID. Read
// and ReadNative.
func IDAttribute(name string) Option {
	return func(c *config) {
		c.Set("IDAttribute")
		if name == "" {
			c.Errorf("IDAttribute(\"\"): want an attribute name")
		}
		c.idAttribute = name
	}
}

// TimestampAttribute names the attribute holding the event time (RFC 3339 or
// epoch milliseconds). Messages without it, or with an unparseable value, are
// stamped with their publish time. Read and ReadNative.
func TimestampAttribute(name string) Option {
	return func(c *config) {
		c.Set("TimestampAttribute")
		if name == "" {
			c.Errorf("TimestampAttribute(\"\"): want an attribute name")
		}
		c.timestampAttribute = name
	}
}

// AckDeadline is the lease Read takes on each message it pulled and renews
// until the message is acked (default 60s; Pub/Sub allows 10s to 600s, the
// emulators less). Read.
func AckDeadline(d time.Duration) Option {
	return func(c *config) {
		c.Set("AckDeadline")
		if d < time.Second || d > 600*time.Second {
			c.Errorf("AckDeadline(%v): want 1s to 600s", d)
		}
		c.ackDeadline = d
	}
}

// MaxBundleDuration bounds how long one bundle of the source pulls before it
// checkpoints (default 1s). Output behind a shuffle appears after the bundle
// commits, so this bounds latency. Read.
func MaxBundleDuration(d time.Duration) Option { return func(c *config) { c.SetMaxBundle(d) } }

// MaxBundleMessages bounds how many messages one bundle of the source
// emits (default 5000). Read.
func MaxBundleMessages(n int) Option {
	return func(c *config) { c.SetMaxElements("MaxBundleMessages", n) }
}

// IdleStop makes each reader finish after d without any message, which
// ends the pipeline once all readers have stopped and the rest of the job
// is done. 0 (the default) reads forever. Only polls the server answered
// (empty) count as idle: a Pull that times out does not. Read.
func IdleStop(d time.Duration) Option { return func(c *config) { c.SetIdleStop(d) } }

// Readers sets how many readers pull from the subscription concurrently
// (default 1). Pub/Sub spreads messages over all pullers of a subscription;
// each reader is a restriction of its own that the runner can schedule on
// its own worker. Read.
func Readers(n int) Option {
	return func(c *config) {
		c.Set("Readers")
		if n <= 0 {
			c.Errorf("Readers(%d): want at least 1", n)
		}
		c.readers = n
	}
}

// WatermarkLag is how far behind wall-clock time the watermark stays while
// the subscription is idle (default 2s): messages published less than this
// before an idle poll are still on time. Read.
func WatermarkLag(d time.Duration) Option { return func(c *config) { c.SetWatermarkLag(d) } }

// publishBatch sets how many messages one Publish request carries (500;
// Pub/Sub allows up to 1000 and 10 MB): tests only, to publish a bundle
// in several requests.
func publishBatch(n int) Option {
	return func(c *config) {
		c.Set("publishBatch")
		if n <= 0 || n > 1000 {
			c.Errorf("publishBatch(%d): want 1 to 1000", n)
		}
		c.publishBatch = n
	}
}

// withoutLease turns lease extension off (tests only: it shows the
// redeliveries that leasing prevents).
func withoutLease() Option {
	return func(c *config) {
		c.Set("withoutLease")
		c.disableLease = true
	}
}

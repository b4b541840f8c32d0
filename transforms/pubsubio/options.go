package pubsubio

import (
	"time"

	"github.com/beamdedup/beamdedup/internal/unbounded"
)

// Option configures Read, Write, Ack and ReadNative; each option's doc
// says which take it. TryRead, TryWrite and TryAck return every mistake at
// once.
type Option func(*config)

// config is what the options set.
type config struct {
	unbounded.Config

	endpoint           string
	idAttribute        string
	timestampAttribute string
	ackDeadline        time.Duration
	readers            int
	disableLease       bool // withoutLease, in tests
	publishBatch       int  // publishBatch, in tests
}

var (
	readOptions = []string{"Endpoint", "IDAttribute", "TimestampAttribute", "AckDeadline", "MaxBundleDuration",
		"MaxBundleMessages", "IdleStop", "Readers", "WatermarkLag", unbounded.ControlOptionName, "withoutLease"}
	nativeReadOptions = []string{"IDAttribute", "TimestampAttribute"}
	writeOptions      = []string{"Endpoint", "publishBatch"}
	ackOptions        = []string{"Endpoint"}
)

// newConfig applies opts for transform, which takes the options allowed;
// more are errors of its own arguments.
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

// Endpoint connects to an emulator (host:port) without TLS or credentials
// (default: PUBSUB_EMULATOR_HOST when set, else Google's endpoint with
// application default credentials). Read, Write and Ack.
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

// MaxBundleDuration bounds how long one bundle of the source pulls before
// it checkpoints (default 1s), and so the latency. Read.
func MaxBundleDuration(d time.Duration) Option { return func(c *config) { c.SetMaxBundle(d) } }

// MaxBundleMessages bounds how many messages one bundle of the source
// emits (default 5000). Read.
func MaxBundleMessages(n int) Option {
	return func(c *config) { c.SetMaxElements("MaxBundleMessages", n) }
}

// IdleStop makes each reader finish after d without any message, which
// ends the pipeline once the rest is done. 0 (the default) reads forever.
// A Pull that times out is not idle. Read.
func IdleStop(d time.Duration) Option { return func(c *config) { c.SetIdleStop(d) } }

// Readers sets how many readers pull from the subscription concurrently
// (default 1), each a restriction the runner can schedule apart. Read.
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

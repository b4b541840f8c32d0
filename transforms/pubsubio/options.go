package pubsubio

import (
	"fmt"
	"strings"
	"time"

	"github.com/beamdedup/beamdedup/internal/unbounded"
)

// Defaults of the options.
const (
	DefaultAckDeadline       = 60 * time.Second
	DefaultMaxBundleDuration = time.Second
	DefaultMaxBundleMessages = 5000
	DefaultPullBatch         = 1000
	DefaultWatermarkLag      = 2 * time.Second
	DefaultPublishBatch      = 500
)

// Option configures Read, Write and Ack (and ReadNative). Each option's
// doc says which of them take it; the others refuse it. A nil option, an
// empty name or a value out of range is recorded, and TryRead, TryWrite
// and TryAck return every such error at once (Read, Write and Ack panic
// with them).
type Option func(*config)

// config is what the options set. An option records its name and its
// errors (unbounded.Record), so that a transform can refuse the ones that are not
// its own.
type config struct {
	endpoint           string
	idAttribute        string
	timestampAttribute string
	ackDeadline        time.Duration
	maxBundleDuration  time.Duration
	maxBundleMessages  int
	pullBatch          int
	idleStop           time.Duration
	readers            int
	watermarkLag       time.Duration
	stopID             string // see StopWith
	disableLease       bool
	publishBatch       int

	unbounded.Record
}

// The options each transform takes.
var (
	readOptions = []string{"Endpoint", "IDAttribute", "TimestampAttribute", "AckDeadline", "MaxBundleDuration",
		"MaxBundleMessages", "PullBatch", "IdleStop", "Readers", "WatermarkLag", "StopWith", "withoutLease"}
	nativeReadOptions = []string{"IDAttribute", "TimestampAttribute"}
	writeOptions      = []string{"Endpoint", "PublishBatch"}
	ackOptions        = []string{"Endpoint"}
)

// newConfig applies opts for transform (its name in errors), which takes
// the options named in allowed; more, when not nil, are errors of the
// transform's own arguments, reported with the options'.
func newConfig(transform string, allowed []string, opts []Option, more ...error) (config, error) {
	c := config{
		ackDeadline:       DefaultAckDeadline,
		maxBundleDuration: DefaultMaxBundleDuration,
		maxBundleMessages: DefaultMaxBundleMessages,
		pullBatch:         DefaultPullBatch,
		readers:           1,
		watermarkLag:      DefaultWatermarkLag,
		publishBatch:      DefaultPublishBatch,
	}
	for i, o := range opts {
		if o == nil {
			c.NilOption(i, len(opts))
			continue
		}
		o(&c)
	}
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
func MaxBundleDuration(d time.Duration) Option {
	return func(c *config) {
		c.Set("MaxBundleDuration")
		if d <= 0 {
			c.Errorf("MaxBundleDuration(%v): want a positive duration", d)
		}
		c.maxBundleDuration = d
	}
}

// MaxBundleMessages bounds how many messages one bundle of the source
// emits (default 5000). Read.
func MaxBundleMessages(n int) Option {
	return func(c *config) {
		c.Set("MaxBundleMessages")
		if n <= 0 {
			c.Errorf("MaxBundleMessages(%d): want a positive number", n)
		}
		c.maxBundleMessages = n
	}
}

// PullBatch is the MaxMessages of each Pull request (default 1000). Read.
func PullBatch(n int) Option {
	return func(c *config) {
		c.Set("PullBatch")
		if n <= 0 {
			c.Errorf("PullBatch(%d): want a positive number", n)
		}
		c.pullBatch = n
	}
}

// IdleStop makes each reader finish after d without any message, which
// ends the pipeline once all readers have stopped and the rest of the job
// is done. 0 (the default) reads forever. Only polls the server answered
// (empty) count as idle: a Pull that times out does not. Read.
func IdleStop(d time.Duration) Option {
	return func(c *config) {
		c.Set("IdleStop")
		if d < 0 {
			c.Errorf("IdleStop(%v): want 0 (read forever) or a positive duration", d)
		}
		c.idleStop = d
	}
}

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
func WatermarkLag(d time.Duration) Option {
	return func(c *config) {
		c.Set("WatermarkLag")
		if d < 0 {
			c.Errorf("WatermarkLag(%v): want 0 or a positive duration", d)
		}
		c.watermarkLag = d
	}
}

// PublishBatch sets how many messages one Publish request carries (default
// 500; Pub/Sub allows up to 1000 and 10 MB). Write.
func PublishBatch(n int) Option {
	return func(c *config) {
		c.Set("PublishBatch")
		if n <= 0 || n > 1000 {
			c.Errorf("PublishBatch(%d): want 1 to 1000", n)
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

// checkName requires a fully qualified name projects/P/<kind>/N and says
// so when name is of the other kind.
func checkName(name, kind string) error {
	if _, _, ok := splitName(name, kind); ok {
		return nil
	}
	other := map[string]string{"subscriptions": "topics", "topics": "subscriptions"}[kind]
	hint := ""
	if _, _, ok := splitName(name, other); ok {
		hint = " (that names a " + strings.TrimSuffix(other, "s") + ")"
	}
	singular := strings.TrimSuffix(kind, "s")
	return fmt.Errorf("%q is not a full %s name%s; want projects/PROJECT/%s/NAME", name, singular, hint, kind)
}

// CheckSubscriptionName returns an error unless name has the form
// projects/PROJECT/subscriptions/NAME, for a program that takes names from
// its user and wants to refuse a bad one before it builds a job.
func CheckSubscriptionName(name string) error { return checkName(name, "subscriptions") }

// CheckTopicName is CheckSubscriptionName for projects/PROJECT/topics/NAME.
func CheckTopicName(name string) error { return checkName(name, "topics") }

func splitName(name, kind string) (project, short string, ok bool) {
	rest, ok := strings.CutPrefix(name, "projects/")
	if !ok {
		return "", "", false
	}
	project, rest, ok = strings.Cut(rest, "/")
	if !ok || project == "" {
		return "", "", false
	}
	short, ok = strings.CutPrefix(rest, kind+"/")
	if !ok || short == "" || strings.Contains(short, "/") {
		return "", "", false
	}
	return project, short, true
}

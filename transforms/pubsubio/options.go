package pubsubio

import (
	"errors"
	"fmt"
	"time"
)

// Defaults of the read options.
const (
	DefaultAckDeadline       = 60 * time.Second
	DefaultMaxBundleDuration = time.Second
	DefaultMaxBundleMessages = 5000
	DefaultPullBatch         = 1000
	DefaultWatermarkLag      = 2 * time.Second
)

type readConfig struct {
	Endpoint           string
	IDAttribute        string
	TimestampAttribute string
	AckDeadline        time.Duration
	MaxBundleDuration  time.Duration
	MaxBundleMessages  int
	PullBatch          int
	IdleStop           time.Duration
	Readers            int
	WatermarkLag       time.Duration
	StopID             string // see StopWith
	disableLease       bool
}

// ReadOption configures Read. Options validate their argument and make
// TryRead return an error (Read panics with it).
type ReadOption func(*readConfig) error

// Endpoint connects to an emulator (host:port) without TLS or credentials.
// Without it the client uses PUBSUB_EMULATOR_HOST when set, else Google's
// endpoint with application default credentials.
func Endpoint(hostPort string) ReadOption {
	return func(c *readConfig) error {
		c.Endpoint = hostPort
		return nil
	}
}

// IDAttribute names the attribute that carries a publisher-assigned message
// id; Message.ID takes its value, so publisher retries share one ID.
func IDAttribute(name string) ReadOption {
	return func(c *readConfig) error {
		c.IDAttribute = name
		return nil
	}
}

// TimestampAttribute names the attribute holding the event time (RFC 3339 or
// epoch milliseconds). Messages without it, or with an unparseable value, are
// stamped with their publish time.
func TimestampAttribute(name string) ReadOption {
	return func(c *readConfig) error {
		c.TimestampAttribute = name
		return nil
	}
}

// AckDeadline is the lease the source takes on each claimed message and
// renews while the message is in flight (default 60s; Pub/Sub allows 10s to
// 600s). It must exceed the time a runner takes from a bundle's end to the
// start of its residual, or messages are redelivered (and deduplicated).
func AckDeadline(d time.Duration) ReadOption {
	return func(c *readConfig) error {
		if d < time.Second || d > 600*time.Second {
			return fmt.Errorf("pubsubio: AckDeadline %v out of range [1s, 600s]", d)
		}
		c.AckDeadline = d
		return nil
	}
}

// MaxBundleDuration bounds how long one bundle of the source pulls before it
// checkpoints (default 1s). Messages are acked one bundle later, and output
// behind a shuffle appears after the bundle commits, so this bounds latency.
func MaxBundleDuration(d time.Duration) ReadOption {
	return func(c *readConfig) error {
		if d <= 0 {
			return fmt.Errorf("pubsubio: MaxBundleDuration must be positive, got %v", d)
		}
		c.MaxBundleDuration = d
		return nil
	}
}

// MaxBundleMessages bounds how many messages one bundle claims (default 5000).
func MaxBundleMessages(n int) ReadOption {
	return func(c *readConfig) error {
		if n <= 0 {
			return fmt.Errorf("pubsubio: MaxBundleMessages must be positive, got %d", n)
		}
		c.MaxBundleMessages = n
		return nil
	}
}

// PullBatch is the MaxMessages of each Pull request (default 1000).
func PullBatch(n int) ReadOption {
	return func(c *readConfig) error {
		if n <= 0 {
			return fmt.Errorf("pubsubio: PullBatch must be positive, got %d", n)
		}
		c.PullBatch = n
		return nil
	}
}

// IdleStop makes each reader finish after d without any message: it acks
// what it carries and returns StopProcessing, which ends the pipeline once
// all readers have stopped. 0 (the default) reads forever. Only polls the
// server answered (empty) count as idle: a Pull that times out does not.
func IdleStop(d time.Duration) ReadOption {
	return func(c *readConfig) error {
		if d < 0 {
			return fmt.Errorf("pubsubio: IdleStop must not be negative, got %v", d)
		}
		c.IdleStop = d
		return nil
	}
}

// Readers sets how many readers pull from the subscription concurrently
// (default 1). Pub/Sub spreads messages over all pullers of a subscription;
// each reader is an independent restriction the runner can schedule on its
// own worker.
func Readers(n int) ReadOption {
	return func(c *readConfig) error {
		if n <= 0 {
			return fmt.Errorf("pubsubio: Readers must be positive, got %d", n)
		}
		c.Readers = n
		return nil
	}
}

// WatermarkLag is how far behind wall-clock time the watermark stays while
// the subscription is idle (default 2s): messages published less than this
// before an idle poll are still on time.
func WatermarkLag(d time.Duration) ReadOption {
	return func(c *readConfig) error {
		if d < 0 {
			return fmt.Errorf("pubsubio: WatermarkLag must not be negative, got %v", d)
		}
		c.WatermarkLag = d
		return nil
	}
}

func newReadConfig(subscription string, opts []ReadOption) (readConfig, error) {
	c := readConfig{
		AckDeadline:       DefaultAckDeadline,
		MaxBundleDuration: DefaultMaxBundleDuration,
		MaxBundleMessages: DefaultMaxBundleMessages,
		PullBatch:         DefaultPullBatch,
		Readers:           1,
		WatermarkLag:      DefaultWatermarkLag,
	}
	if err := checkName(subscription, "subscriptions"); err != nil {
		return c, err
	}
	var errs []error
	for _, o := range opts {
		if err := o(&c); err != nil {
			errs = append(errs, err)
		}
	}
	return c, errors.Join(errs...)
}

// checkName requires a fully qualified name projects/P/<kind>/N.
func checkName(name, kind string) error {
	if _, _, ok := splitName(name, kind); !ok {
		return fmt.Errorf("pubsubio: %q is not a full %s name; want projects/PROJECT/%s/NAME", name, kind[:len(kind)-1], kind)
	}
	return nil
}

func splitName(name, kind string) (project, short string, ok bool) {
	var rest string
	const p = "projects/"
	if len(name) <= len(p) || name[:len(p)] != p {
		return "", "", false
	}
	rest = name[len(p):]
	for i := 0; i < len(rest); i++ {
		if rest[i] == '/' {
			project, rest = rest[:i], rest[i+1:]
			prefix := kind + "/"
			if project == "" || len(rest) <= len(prefix) || rest[:len(prefix)] != prefix {
				return "", "", false
			}
			short = rest[len(prefix):]
			for j := 0; j < len(short); j++ {
				if short[j] == '/' {
					return "", "", false
				}
			}
			return project, short, true
		}
	}
	return "", "", false
}

// withoutLease disables lease extension (tests only).
func withoutLease() ReadOption {
	return func(c *readConfig) error {
		c.disableLease = true
		return nil
	}
}

package pgsink

import (
	"errors"
	"fmt"
	"time"

	"github.com/beamdedup/beamdedup/internal/pgwrite"
	"github.com/beamdedup/beamdedup/internal/testhook"
	"github.com/beamdedup/beamdedup/transforms/internal/option"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// Option configures Write: the rows' roles (rowspec's options or a
// rowspec.Spec; rowspec.PartitionBy, the table's unique key, is required)
// and this package's settings.
type Option = rowspec.Option

// config is what Write's options set.
type config struct {
	w     pgwrite.Config
	hooks testhook.Pgsink
	errs  []error
}

func own(name string, set func(*config)) Option {
	return option.Own("pgsink."+name, set).(Option)
}

func init() {
	testhook.PgsinkOption = func(set func(*testhook.Pgsink)) any {
		return own("a test hook", func(c *config) { set(&c.hooks) })
	}
}

// newConfig applies opts and reports every mistake at once.
func newConfig(opts []Option) (config, error) {
	c := config{w: pgwrite.Defaults()}
	var roles rowspec.Spec
	errs := option.Apply("pgsink.Write", opts, &roles, &c)
	c.w.Roles = roles
	errs = append(errs, c.errs...)
	if len(errs) == 0 {
		errs = append(errs, c.w.Validate())
	}
	return c, errors.Join(errs...)
}

func (c *config) name(option, name string) string {
	if name == "" {
		c.errs = append(c.errs, fmt.Errorf(`%s(""): the name is empty`, option))
	}
	return name
}

// DSN is the connection string of the database, a URL or key=value pairs
// as libpq reads them. It travels in the pipeline graph: keep a password
// out of it (PGPASSWORD, PGPASSFILE, or DSNFromEnv). Errors and logs name
// the target as host:port/database (user), never the DSN.
func DSN(dsn string) Option { return own("DSN", func(c *config) { c.w.DSN, c.w.DSNEnv = dsn, "" }) }

// DSNFromEnv reads the DSN from environment variable name where the sink
// runs: at construction (for the table check) and on each worker.
func DSNFromEnv(name string) Option {
	return own("DSNFromEnv", func(c *config) { c.w.DSNEnv, c.w.DSN = c.name("DSNFromEnv", name), "" })
}

// Table is the table to write, as SQL names it: orders, shop.orders, or
// "Orders" quoted for a mixed-case name. It needs a unique index on
// exactly the rowspec.PartitionBy columns (the ON CONFLICT target).
func Table(name string) Option {
	return own("Table", func(c *config) { c.w.Table = c.name("Table", name) })
}

// Tombstone names a boolean column that marks a deleted key: a -D row is
// written with it true instead of deleted, so that its ordering value
// stays and an older row cannot bring the key back. Required with an
// ordering column and a rowspec.KindColumn.
func Tombstone(column string) Option {
	return own("Tombstone", func(c *config) { c.w.Tombstone = c.name("Tombstone", column) })
}

// BatchSize is the number of input rows per transaction (default 5000).
func BatchSize(n int) Option { return own("BatchSize", func(c *config) { c.w.BatchSize = n }) }

// MaxConns bounds the connections of one worker process to the DSN
// (default 4), shared by the sink's instances there.
func MaxConns(n int) Option { return own("MaxConns", func(c *config) { c.w.MaxConns = n }) }

// Retries sets how often a batch is retried after a lost connection or a
// transient error, and the first wait, doubled up to 10 s (defaults 5 and
// 200 ms). Then the bundle fails.
func Retries(n int, backoff time.Duration) Option {
	return own("Retries", func(c *config) { c.w.Retries, c.w.Backoff = n, backoff })
}

// UID names the transform's scope, and the Transform field of its dead
// letters (default "PostgresWrite").
func UID(uid string) Option {
	return own("UID", func(c *config) {
		if uid == "" {
			c.errs = append(c.errs, errors.New(`UID(""): the UID is empty; omit UID for the default name`))
		}
		c.w.UID = uid
	})
}

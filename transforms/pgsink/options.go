package pgsink

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// Option configures Write. A mistake in an option (a nil Option, an empty
// name) is a construction error that names the option.
type Option func(*config)

type config struct {
	dsn, dsnEnv string
	table       string
	keys        []string
	kindCol     string
	upsert      bool
	seqCol      string
	timeCol     string
	tombstone   string
	batchSize   int
	maxConns    int
	retries     int
	backoff     time.Duration
	uid         string
	skipCheck   bool
	errs        []error
}

// Defaults.
const (
	DefaultBatchSize = 5000 // rows per transaction (docs/pgsink.md has the measurements)
	DefaultMaxConns  = 4    // connections per worker process and DSN
	DefaultRetries   = 5    // reconnections per batch before the bundle fails
	DefaultBackoff   = 200 * time.Millisecond
	maxBackoff       = 10 * time.Second
)

func newConfig(opts []Option) config {
	c := config{batchSize: DefaultBatchSize, maxConns: DefaultMaxConns, retries: DefaultRetries, backoff: DefaultBackoff}
	for i, o := range opts {
		if o == nil {
			c.fail("option %d of %d is nil", i+1, len(opts))
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

// name records a mistake when an option names the empty column (or table,
// or variable).
func (c *config) name(option, name string) string {
	if name == "" {
		c.fail(`%s(""): the name is empty`, option)
	}
	return name
}

// DSN is the connection string of the database: a URL
// (postgres://user@host:5432/db?sslmode=require) or key=value pairs, as
// libpq and pgx read them. It travels in the pipeline graph to the workers;
// to keep a password out of the graph leave it out of the DSN and give it
// to the workers as PGPASSWORD or in a password file (PGPASSFILE), or use
// DSNFromEnv. The sink never writes the DSN into an error or a log: it
// names the target as host:port/database (user).
func DSN(dsn string) Option { return func(c *config) { c.dsn, c.dsnEnv = dsn, "" } }

// DSNFromEnv reads the DSN from environment variable name where the sink
// runs: at construction (for the table check) and on each worker.
func DSNFromEnv(name string) Option {
	return func(c *config) { c.dsnEnv, c.dsn = c.name("DSNFromEnv", name), "" }
}

// Table is the table to write, as SQL names it: orders, shop.orders, or
// "Orders" quoted for a mixed-case name.
func Table(name string) Option { return func(c *config) { c.table = c.name("Table", name) } }

// PartitionBy names the key columns, as dedup.PartitionBy does: the table
// needs a unique index on exactly these columns (the ON CONFLICT target).
// A nil pointer column is NULL, and NULL keys are equal, as in dedup: a
// nullable key column needs UNIQUE NULLS NOT DISTINCT (PostgreSQL 15).
func PartitionBy(columns ...string) Option {
	return func(c *config) {
		if len(columns) == 0 {
			c.fail("PartitionBy() needs at least one column: the table's unique key")
		}
		c.keys = columns // an empty name is the Spec's error (validate)
	}
}

// Spec takes the roles of the rows' columns from the deduplication that
// produced them (dedup.Result.Spec): Key as PartitionBy, Kind as
// KindColumn, OnTime and SequenceBy as the guard's columns, Upsert as
// Upsert. An empty role sets nothing; a later option of the same kind
// replaces what it set.
func Spec(spec rowspec.Spec) Option {
	return func(c *config) {
		if len(spec.Key) > 0 {
			c.keys = spec.Key
		}
		if spec.Kind != "" {
			c.kindCol = spec.Kind
		}
		if spec.OnTime != "" {
			c.timeCol = spec.OnTime
		}
		if spec.SequenceBy != "" {
			c.seqCol = spec.SequenceBy
		}
		if spec.Upsert {
			c.upsert = true
		}
	}
}

// KindColumn names the row's kind column, as dedup.KindColumn does: a
// string ("+I", "-U", "+U", "-D"; "" reads as +I) or a rowkind.Kind. +I
// and +U upsert the row, -U is skipped, -D deletes the key (or writes a
// Tombstone). The column is not written to the table.
func KindColumn(column string) Option {
	return func(c *config) { c.kindCol = c.name("KindColumn", column) }
}

// Upsert makes every row (or every +I/+U row, with KindColumn) replace its
// key's row, as dedup.KeepLast's Upsert output wants. Without Upsert and
// KindColumn the sink is insert-only: a row whose key is in the table
// changes nothing (ON CONFLICT DO NOTHING).
func Upsert() Option { return func(c *config) { c.upsert = true } }

// SequenceBy guards the write with column, as dedup.SequenceBy orders rows:
// a row replaces its key's row only if its value is at least the stored
// one, so a late retry of an older version never overwrites a newer one.
// With OnTime too, rows compare by the sequence value, then the time.
func SequenceBy(column string) Option {
	return func(c *config) { c.seqCol = c.name("SequenceBy", column) }
}

// OnTime guards the write with the event-time column (time.Time or int64
// Unix milliseconds), as dedup.OnTime orders KeepLast's rows: a time to
// the microsecond, which the table's timestamp column keeps (a column
// declared with fewer fractional digits is refused), an int64 to the
// millisecond.
func OnTime(column string) Option { return func(c *config) { c.timeCol = c.name("OnTime", column) } }

// Tombstone names a boolean column of the table that marks a deleted key:
// a -D row is written as a tombstone (the row, with this column true)
// instead of being deleted, so that its ordering value stays and an older
// row that arrives later cannot bring the key back. Required with an
// ordering column and KindColumn. Readers filter with WHERE NOT column.
func Tombstone(column string) Option {
	return func(c *config) { c.tombstone = c.name("Tombstone", column) }
}

// BatchSize is the number of input rows per transaction (default
// DefaultBatchSize). A bundle is written in batches of at most this many
// rows, the last one when the bundle ends.
func BatchSize(n int) Option { return func(c *config) { c.batchSize = n } }

// MaxConns bounds the connections of one worker process to the DSN
// (default DefaultMaxConns), shared by the sink's instances there.
func MaxConns(n int) Option { return func(c *config) { c.maxConns = n } }

// Retries sets how often a batch is retried after a lost connection or a
// transient error (serialization failure, deadlock, server shutting down),
// and the first wait, doubled after each attempt up to 10 s (defaults
// DefaultRetries and DefaultBackoff). Then the bundle fails.
func Retries(n int, backoff time.Duration) Option {
	return func(c *config) { c.retries, c.backoff = n, backoff }
}

// UID names the transform's scope, and the Transform field of its dead
// letters (default "PostgresWrite").
func UID(uid string) Option {
	return func(c *config) {
		if uid == "" {
			c.fail(`UID(""): the UID is empty; omit UID for the default name`)
		}
		c.uid = uid
	}
}

// SkipConstructionCheck turns off the table check at construction, for a
// launcher that cannot reach the database. The check then runs only on
// the workers, where a mismatch fails the first bundle with the same
// message.
func SkipConstructionCheck() Option { return func(c *config) { c.skipCheck = true } }

func (c *config) stepName() string {
	if c.uid != "" {
		return c.uid
	}
	return "PostgresWrite"
}

// ordered reports whether writes are guarded by an ordering column.
func (c *config) ordered() bool { return c.seqCol != "" || c.timeCol != "" }

// insertOnly reports whether the sink only inserts.
func (c *config) insertOnly() bool { return c.kindCol == "" && !c.upsert }

// spec is the roles of the rows' columns the options name.
func (c *config) spec() rowspec.Spec {
	return rowspec.Spec{Key: c.keys, Kind: c.kindCol, OnTime: c.timeCol, SequenceBy: c.seqCol}
}

// orderColumns are the guard's columns, compared in this order.
func (c *config) orderColumns() []string {
	var cols []string
	if c.seqCol != "" {
		cols = append(cols, c.seqCol)
	}
	if c.timeCol != "" {
		cols = append(cols, c.timeCol)
	}
	return cols
}

// resolveDSN returns the DSN, read from the environment for DSNFromEnv.
func (c *config) resolveDSN() (string, error) {
	if c.dsnEnv != "" {
		v := os.Getenv(c.dsnEnv)
		if v == "" {
			return "", fmt.Errorf("DSNFromEnv(%q): the environment variable is empty or unset", c.dsnEnv)
		}
		return v, nil
	}
	return c.dsn, nil
}

// validate checks the options, reporting every problem at once.
func (c *config) validate() error {
	errs := slices.Clone(c.errs)
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.dsn == "" && c.dsnEnv == "" {
		add("no database: set DSN(dsn) or DSNFromEnv(name)")
	}
	if c.table == "" {
		add("no table: set Table(name)")
	}
	if len(c.keys) == 0 {
		add("no key: set PartitionBy(columns...) to the table's unique key (the ON CONFLICT target)")
	}
	if c.batchSize < 1 {
		add("BatchSize(%d): it must be at least 1", c.batchSize)
	}
	if c.maxConns < 1 {
		add("MaxConns(%d): it must be at least 1", c.maxConns)
	}
	if c.retries < 0 || c.backoff < 0 {
		add("Retries(%d, %v): it needs n >= 0 and backoff >= 0", c.retries, c.backoff)
	}
	if err := c.spec().Err(); err != nil {
		errs = append(errs, err) // every role's column once, a key column once
	}
	if c.insertOnly() && c.ordered() {
		add("SequenceBy/OnTime guard replacements, and an insert-only sink replaces nothing: add Upsert() or KindColumn(column), or drop the ordering")
	}
	if c.tombstone != "" && c.kindCol == "" {
		add("Tombstone(%q) marks -D rows, which only an input with a KindColumn(column) has", c.tombstone)
	}
	if c.ordered() && c.kindCol != "" && c.tombstone == "" {
		add("a guarded changelog needs Tombstone(column): a -D must leave its key's ordering value in the table, or an older row retried after it brings the key back; add a boolean column (deleted boolean NOT NULL DEFAULT false) and name it with Tombstone")
	}
	if t := c.tombstone; t != "" && (slices.Contains(c.keys, t) || t == c.kindCol || slices.Contains(c.orderColumns(), t)) {
		add("Tombstone(%q) names a PartitionBy, kind or ordering column; it must be a column of the table only", t)
	}
	return errors.Join(errs...)
}

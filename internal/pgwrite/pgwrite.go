// Package pgwrite is what pgsink.Write runs on each worker, and what
// pipelines/internal/pgkept calls directly: a Writer folds rows per key and
// writes them in batches, one transaction each, guarded by the ordering
// columns, with dead letters for the rows the table refuses and retries
// for a lost connection. Config is the sink's configuration.
//
// The files: writer.go folds and writes the batches, sql.go makes the
// statements, table.go reads and checks the table, layout.go reads the row
// type, conn.go shares a process's pools and keeps the password out of
// every message, fault.go sorts errors and retry.go retries.
package pgwrite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/beamdedup/beamdedup/internal/rowcol"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// Config is the sink's configuration: pgsink's options set it, and it
// travels to the workers in the sink's DoFn.
type Config struct {
	DSN    string `json:"dsn,omitempty"`
	DSNEnv string `json:"dsn_env,omitempty"` // the DSN's environment variable, read where the sink runs
	Table  string `json:"table"`
	// Roles are the rows' key (the table's unique key), kind and ordering
	// columns, and whether they are upserts.
	Roles     rowspec.Spec  `json:"roles"`
	Tombstone string        `json:"tombstone,omitempty"`
	BatchSize int           `json:"batch_size"`
	MaxConns  int           `json:"max_conns"`
	Retries   int           `json:"retries"`
	Backoff   time.Duration `json:"backoff"`
	UID       string        `json:"uid"` // the Transform of its dead letters, and its counters' namespace
}

// The defaults pgsink's options document.
const (
	DefaultBatchSize = 5000 // rows per transaction (docs/pgsink.md has the measurements)
	DefaultMaxConns  = 4    // connections per worker process and DSN
	DefaultRetries   = 5    // reconnections per batch before the bundle fails
	DefaultBackoff   = 200 * time.Millisecond
	DefaultUID       = "PostgresWrite"
	maxBackoff       = 10 * time.Second
)

// Defaults is a Config with the default tuning and UID, and nothing to
// write to.
func Defaults() Config {
	return Config{BatchSize: DefaultBatchSize, MaxConns: DefaultMaxConns, Retries: DefaultRetries, Backoff: DefaultBackoff, UID: DefaultUID}
}

// ordered reports whether writes are guarded by an ordering column.
func (c *Config) ordered() bool { return c.Roles.SequenceBy != "" || c.Roles.OnTime != "" }

// insertOnly reports whether the sink only inserts.
func (c *Config) insertOnly() bool { return c.Roles.Kind == "" && !c.Roles.Upsert }

// orderColumns are the guard's columns, compared in this order.
func (c *Config) orderColumns() []string {
	var cols []string
	if c.Roles.SequenceBy != "" {
		cols = append(cols, c.Roles.SequenceBy)
	}
	if c.Roles.OnTime != "" {
		cols = append(cols, c.Roles.OnTime)
	}
	return cols
}

// resolveDSN returns the DSN, read from the environment for DSNEnv.
func (c *Config) resolveDSN() (string, error) {
	if c.DSNEnv != "" {
		v := os.Getenv(c.DSNEnv)
		if v == "" {
			return "", fmt.Errorf("DSNFromEnv(%q): the environment variable is empty or unset", c.DSNEnv)
		}
		return v, nil
	}
	return c.DSN, nil
}

// Validate checks the configuration, reporting every problem at once by
// the pgsink option that sets it.
func (c *Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.DSN == "" && c.DSNEnv == "" {
		add("no database: set DSN(dsn) or DSNFromEnv(name)")
	}
	if c.Table == "" {
		add("no table: set Table(name)")
	}
	if len(c.Roles.Key) == 0 {
		add("no key: set rowspec.PartitionBy(columns...) to the table's unique key (the ON CONFLICT target)")
	}
	if c.BatchSize < 1 {
		add("BatchSize(%d): it must be at least 1", c.BatchSize)
	}
	if c.MaxConns < 1 {
		add("MaxConns(%d): it must be at least 1", c.MaxConns)
	}
	if c.Retries < 0 || c.Backoff < 0 {
		add("Retries(%d, %v): it needs n >= 0 and backoff >= 0", c.Retries, c.Backoff)
	}
	if err := rowcol.Err(c.Roles); err != nil {
		errs = append(errs, err) // every role's column once, a key column once
	}
	if c.insertOnly() && c.ordered() {
		add("SequenceBy/OnTime guard replacements, and an insert-only sink replaces nothing: add Upsert() or KindColumn(column), or drop the ordering")
	}
	if c.Tombstone != "" && c.Roles.Kind == "" {
		add("Tombstone(%q) marks -D rows, which only an input with a KindColumn(column) has", c.Tombstone)
	}
	if c.ordered() && c.Roles.Kind != "" && c.Tombstone == "" {
		add("a guarded changelog needs Tombstone(column): a -D must leave its key's ordering value in the table, or an older row retried after it brings the key back; add a boolean column (deleted boolean NOT NULL DEFAULT false) and name it with Tombstone")
	}
	if t := c.Tombstone; t != "" && (slices.Contains(c.Roles.Key, t) || t == c.Roles.Kind || slices.Contains(c.orderColumns(), t)) {
		add("Tombstone(%q) names a PartitionBy, kind or ordering column; it must be a column of the table only", t)
	}
	return errors.Join(errs...)
}

// CheckRowType checks that the roles and the tombstone of c fit rows of
// struct type t, without the database; c is valid.
func CheckRowType(c Config, t reflect.Type) error {
	_, err := newLayout(t, &c)
	return err
}

// Check connects once and checks that rows of rowType map onto the table
// (what pgsink.CheckTable documents); c is valid.
func Check(ctx context.Context, c Config, rowType reflect.Type) error {
	l, err := newLayout(rowType, &c)
	if err != nil {
		return err
	}
	dsn, err := c.resolveDSN()
	if err != nil {
		return err
	}
	cfg, err := parseDSN(dsn, 1)
	if err != nil {
		return err
	}
	t := newTarget(&cfg.ConnConfig.Config)
	conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig)
	if err != nil {
		return t.errorf("connect to check table %s: %w", c.Table, err)
	}
	defer conn.Close(context.Background())
	ti, err := readTable(ctx, conn, c.Table)
	if err != nil {
		return t.errorf("%w", err)
	}
	if err := ti.check(l, &c); err != nil {
		return t.errorf("%w", err)
	}
	return nil
}

// Open resolves the DSN, opens (or shares) the process's pool and reads
// and checks the table for rows of rowType, retrying a lost connection as
// for a batch; c is valid. Close the Writer when done.
func Open(ctx context.Context, c Config, rowType reflect.Type) (*Writer, error) {
	dsn, err := c.resolveDSN()
	if err != nil {
		return nil, fmt.Errorf("pgsink: %w", err)
	}
	l, err := newLayout(rowType, &c)
	if err != nil {
		return nil, fmt.Errorf("pgsink: %w", err)
	}
	pool, t, err := acquirePool(dsn, c.MaxConns)
	if err != nil {
		return nil, err
	}
	var p *plan
	_, err = newRetrier(t, &c).retry(ctx, "reading table "+c.Table, func(ctx context.Context) error {
		conn, err := pool.Acquire(ctx)
		if err != nil {
			return setupFault(classify(ctx, err, nil))
		}
		defer conn.Release()
		ti, err := readTable(ctx, conn, c.Table)
		if err != nil {
			return setupFault(classify(ctx, err, conn.Conn()))
		}
		if err := ti.check(l, &c); err != nil {
			return &fault{class: fatalFault, err: err}
		}
		p = newPlan(l, ti, &c)
		return nil
	})
	if err != nil {
		releasePool(dsn, c.MaxConns)
		return nil, err
	}
	return newWriter(p, pool, dsn, t, &c), nil
}

// setupFault makes every fault but a transient one fatal: reading the
// catalog refuses no row.
func setupFault(f *fault) *fault {
	if f.class != transientFault {
		f.class = fatalFault
	}
	return f
}

package pgwrite

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// applicationName is set on the sink's connections (unless the DSN sets
// one), so they can be told apart in pg_stat_activity.
const applicationName = "beamdedup-pgsink"

// target names a database without its secrets.
type target struct {
	desc   string // host:port/database (user name)
	secret string // the password, removed from every message
}

func newTarget(cfg *pgconn.Config) target {
	return target{
		desc:   fmt.Sprintf("%s:%d/%s (user %s)", cfg.Host, cfg.Port, cfg.Database, cfg.User),
		secret: cfg.Password,
	}
}

// scrub removes the password, as written and as URL-escaped, from s.
func (t target) scrub(s string) string {
	if t.secret == "" {
		return s
	}
	for _, form := range []string{t.secret, url.QueryEscape(t.secret), url.PathEscape(t.secret)} {
		s = strings.ReplaceAll(s, form, "********")
	}
	return s
}

// errorf is an error about the target, its text scrubbed.
func (t target) errorf(format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	return &sinkError{msg: "pgsink: " + t.desc + ": " + t.scrub(err.Error()), err: err}
}

// sinkError is an error whose message has been scrubbed of the password;
// Unwrap keeps the cause for errors.Is and errors.As.
type sinkError struct {
	msg string
	err error
}

func (e *sinkError) Error() string { return e.msg }
func (e *sinkError) Unwrap() error { return e.err }

var quotedDSN = regexp.MustCompile("`[^`]*`")

// parseDSN parses dsn into a pool configuration. Its error never quotes
// the DSN: pgx redacts passwords only on a best-effort basis.
func parseDSN(dsn string, maxConns int) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("pgsink: the DSN does not parse (it is not shown: it may hold a password): %s",
			quotedDSN.ReplaceAllString(err.Error(), "`…`"))
	}
	cfg.MaxConns = int32(maxConns)
	if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		cfg.ConnConfig.RuntimeParams["application_name"] = applicationName
	}
	return cfg, nil
}

// pools holds one pool per DSN and size in a worker process, shared by the
// sink's DoFn instances there, which bounds the process's connections.
var pools = struct {
	sync.Mutex
	m map[string]*sharedPool
}{m: map[string]*sharedPool{}}

type sharedPool struct {
	pool   *pgxpool.Pool
	target target
	refs   int
}

func poolKey(dsn string, maxConns int) string { return strconv.Itoa(maxConns) + " " + dsn }

// acquirePool returns the process's pool for dsn, creating it. It does not
// connect: connections are opened when first needed.
func acquirePool(dsn string, maxConns int) (*pgxpool.Pool, target, error) {
	pools.Lock()
	defer pools.Unlock()
	key := poolKey(dsn, maxConns)
	if sp, ok := pools.m[key]; ok {
		sp.refs++
		return sp.pool, sp.target, nil
	}
	cfg, err := parseDSN(dsn, maxConns)
	if err != nil {
		return nil, target{}, err
	}
	t := newTarget(&cfg.ConnConfig.Config)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, t, t.errorf("%w", err)
	}
	pools.m[key] = &sharedPool{pool: pool, target: t, refs: 1}
	return pool, t, nil
}

// releasePool closes the pool when its last user is done.
func releasePool(dsn string, maxConns int) {
	pools.Lock()
	defer pools.Unlock()
	key := poolKey(dsn, maxConns)
	sp, ok := pools.m[key]
	if !ok {
		return
	}
	if sp.refs--; sp.refs == 0 {
		delete(pools.m, key)
		sp.pool.Close()
	}
}

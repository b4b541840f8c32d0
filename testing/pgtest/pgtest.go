// Package pgtest starts a throwaway PostgreSQL cluster for tests and
// benchmarks: initdb into a temporary directory, a server on a free
// loopback port with its unix socket in that directory, password
// authentication over TCP, and a database per test.
//
// It uses the server binaries of the machine (Debian's postgresql package:
// /usr/lib/postgresql/<version>/bin, or initdb on the PATH), version 15 or
// later (UNIQUE NULLS NOT DISTINCT). initdb and postgres refuse to run as
// root, so as root they run as the postgres user. Without the binaries a
// test is skipped, unless the CI environment variable is set: then it
// fails (SkipOrFail).
//
// A package's tests share one cluster (Shared). A watcher stops it when
// the test binary exits, however it exits (proctest.AfterExit).
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/beamdedup/beamdedup/testing/jobservertest"
	"github.com/beamdedup/beamdedup/testing/proctest"
)

// MinVersion is the oldest server major version accepted: 15 added
// UNIQUE NULLS NOT DISTINCT.
const MinVersion = 15

// ErrNoServer reports that no usable PostgreSQL server binaries were found.
var ErrNoServer = errors.New("pgtest: PostgreSQL server binaries not found")

// Options configure Start.
type Options struct {
	// Durable keeps PostgreSQL's default durability (fsync, synchronous
	// commit, full page writes). Off by default: a throwaway cluster does
	// not need to survive a crash, and tests run faster without.
	Durable bool
}

// Cluster is a running throwaway server.
type Cluster struct {
	Dir      string // temporary directory: data/, the socket, server.log
	Port     int    // TCP port on 127.0.0.1
	User     string // superuser
	Password string // its password (TCP connections use scram-sha-256)
	Version  int    // server major version

	bin     string
	cred    *syscall.Credential // the postgres user when running as root
	stopped atomic.Bool
	dbs     atomic.Int64
}

// BinDir finds the directory of initdb, pg_ctl and postgres: initdb on the
// PATH, else the newest /usr/lib/postgresql/<version>/bin.
func BinDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	slices.SortFunc(dirs, func(a, b string) int { return versionOfPath(b) - versionOfPath(a) })
	if len(dirs) > 0 {
		return filepath.Dir(dirs[0]), nil
	}
	return "", fmt.Errorf("%w: no initdb on PATH or in /usr/lib/postgresql/*/bin (install postgresql, e.g. apt-get install -y postgresql; .ci/run does)", ErrNoServer)
}

func versionOfPath(p string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(p))))
	return v
}

var versionRE = regexp.MustCompile(`\(PostgreSQL\) (\d+)`)

// Start initializes and starts a cluster. Stop it with Stop; if the process
// exits first, a watcher stops it and removes its directory.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	out, err := exec.CommandContext(ctx, filepath.Join(bin, "pg_ctl"), "--version").Output()
	if err != nil {
		return nil, fmt.Errorf("%w: %s/pg_ctl --version: %v", ErrNoServer, bin, err)
	}
	m := versionRE.FindSubmatch(out)
	if m == nil {
		return nil, fmt.Errorf("pgtest: cannot read the version from %q", out)
	}
	version, _ := strconv.Atoi(string(m[1]))
	if version < MinVersion {
		return nil, fmt.Errorf("%w: %s is PostgreSQL %d; version %d or later is needed (UNIQUE NULLS NOT DISTINCT)", ErrNoServer, bin, version, MinVersion)
	}
	c := &Cluster{User: "postgres", Password: fmt.Sprintf("pw-%d-%d", os.Getpid(), time.Now().UnixNano()), Version: version, bin: bin}
	if os.Geteuid() == 0 {
		if c.cred, err = postgresUser(); err != nil {
			return nil, err
		}
	}
	if c.Dir, err = os.MkdirTemp("", "pgtest-"); err != nil {
		return nil, err
	}
	if err := c.start(ctx, opts); err != nil {
		c.stopServer()
		os.RemoveAll(c.Dir)
		return nil, err
	}
	if err := proctest.AfterExit(watcherScript, c.Dir); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// postgresUser is the account the server runs as when the tests run as
// root, which initdb and postgres refuse.
func postgresUser() (*syscall.Credential, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgtest: running as root, and initdb refuses root; no postgres user to run it as: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func (c *Cluster) dataDir() string { return filepath.Join(c.Dir, "data") }

// command runs a server binary as the cluster's owner, in its directory.
func (c *Cluster) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, name), args...)
	cmd.Dir = c.Dir
	cmd.Env = []string{"PATH=" + c.bin + ":/usr/bin:/bin", "LC_ALL=C"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	return cmd
}

func (c *Cluster) start(ctx context.Context, opts Options) error {
	pwfile := filepath.Join(c.Dir, "pwfile")
	if err := os.WriteFile(pwfile, []byte(c.Password+"\n"), 0o600); err != nil {
		return err
	}
	if c.cred != nil {
		for _, p := range []string{c.Dir, pwfile} {
			if err := os.Chown(p, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
				return fmt.Errorf("pgtest: chown %s to the postgres user: %v", p, err)
			}
		}
	}
	initdb := c.command(ctx, "initdb", "-D", c.dataDir(), "-U", c.User, "--pwfile="+pwfile,
		"--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C", "--no-sync")
	if out, err := initdb.CombinedOutput(); err != nil {
		return fmt.Errorf("pgtest: initdb: %v\n%s", err, out)
	}
	os.Remove(pwfile)
	settings := []string{"listen_addresses=127.0.0.1", "unix_socket_directories=" + c.Dir, "max_connections=200"}
	if !opts.Durable {
		settings = append(settings, "fsync=off", "synchronous_commit=off", "full_page_writes=off")
	}
	// The port is free when chosen but may be taken before the server binds
	// it (other test processes do the same): try a few.
	var lastErr error
	for range 5 {
		port, err := jobservertest.FreePort()
		if err != nil {
			return err
		}
		o := "-c " + strings.Join(append([]string{"port=" + strconv.Itoa(port)}, settings...), " -c ")
		pgctl := c.command(ctx, "pg_ctl", "start", "-D", c.dataDir(), "-w", "-t", "60", "-l", filepath.Join(c.Dir, "server.log"), "-o", o)
		out, err := pgctl.CombinedOutput()
		if err == nil {
			c.Port = port
			return nil
		}
		log, _ := os.ReadFile(filepath.Join(c.Dir, "server.log"))
		lastErr = fmt.Errorf("pgtest: pg_ctl start on port %d: %v\n%s\nserver log:\n%s", port, err, out, log)
		if !strings.Contains(string(log), "could not bind") && !strings.Contains(string(log), "could not create") {
			return lastErr
		}
	}
	return lastErr
}

// watcherScript stops the server and removes the directory once the test
// process ($1) has exited or the server has been stopped.
const watcherScript = `parent=$1; dir=$2; pidfile=$dir/data/postmaster.pid
while kill -0 "$parent" 2>/dev/null && [ -f "$pidfile" ]; do sleep 1; done
if [ -f "$pidfile" ]; then
  pid=$(head -n 1 "$pidfile")
  kill -INT "$pid" 2>/dev/null
  i=0
  while kill -0 "$pid" 2>/dev/null && [ "$i" -lt 100 ]; do sleep 0.1; i=$((i+1)); done
  kill -QUIT "$pid" 2>/dev/null
fi
rm -rf "$dir"
`

func (c *Cluster) stopServer() error {
	if _, err := os.Stat(filepath.Join(c.dataDir(), "postmaster.pid")); err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := c.command(ctx, "pg_ctl", "stop", "-D", c.dataDir(), "-m", "fast", "-w").CombinedOutput(); err != nil {
		return fmt.Errorf("pgtest: pg_ctl stop: %v\n%s", err, out)
	}
	return nil
}

// Stop stops the server and removes its directory. It may be called more
// than once.
func (c *Cluster) Stop() error {
	if c.stopped.Swap(true) {
		return nil
	}
	return errors.Join(c.stopServer(), os.RemoveAll(c.Dir))
}

// Addr is the server's TCP address.
func (c *Cluster) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(c.Port)) }

// DSN is a connection URL for database, over TCP with the superuser's
// password.
func (c *Cluster) DSN(database string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(c.User, c.Password),
		Host:     c.Addr(),
		Path:     "/" + database,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// Connect opens a connection to database.
func (c *Cluster) Connect(ctx context.Context, database string) (*pgx.Conn, error) {
	return pgx.Connect(ctx, c.DSN(database))
}

// CreateDatabase creates database name and returns its DSN.
func (c *Cluster) CreateDatabase(ctx context.Context, name string) (string, error) {
	conn, err := c.Connect(ctx, "postgres")
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("pgtest: create database %s: %w", name, err)
	}
	return c.DSN(name), nil
}

// DropDatabase drops database name, closing its connections.
func (c *Cluster) DropDatabase(ctx context.Context, name string) error {
	conn, err := c.Connect(ctx, "postgres")
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	return err
}

var nonIdent = regexp.MustCompile(`[^a-z0-9_]+`)

// NewDatabase creates a database for tb, named after it, dropped when tb
// ends, and returns its DSN.
func (c *Cluster) NewDatabase(tb testing.TB) string {
	tb.Helper()
	name := nonIdent.ReplaceAllString(strings.ToLower(tb.Name()), "_")
	if len(name) > 40 {
		name = name[:40]
	}
	name = fmt.Sprintf("t%d_%s", c.dbs.Add(1), name)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn, err := c.CreateDatabase(ctx, name)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := c.DropDatabase(ctx, name); err != nil {
			tb.Logf("pgtest: drop database %s: %v", name, err)
		}
	})
	return dsn
}

// Shared returns the process's cluster, starting it on first use. Without
// server binaries it skips tb, or fails it when the CI environment variable
// is set. The watcher stops the cluster when the process exits.
func Shared(tb testing.TB) *Cluster {
	tb.Helper()
	c, err := SharedCluster()
	if err != nil {
		SkipOrFail(tb, err)
	}
	return c
}

// SharedCluster is Shared outside a test, for a TestMain: the package's
// shared cluster, started on first use, or the error that stopped it.
var SharedCluster = sync.OnceValues(func() (*Cluster, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return Start(ctx, Options{})
})

// SkipOrFail ends tb for a cluster that could not start: a skip when the
// server binaries are missing outside CI, else a failure
// (proctest.SkipOrFail).
func SkipOrFail(tb testing.TB, err error) {
	tb.Helper()
	proctest.SkipOrFail(tb, err, ErrNoServer)
}

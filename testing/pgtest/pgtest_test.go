package pgtest_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/testing/pgtest"
)

func TestDatabasesOfOneClusterAreSeparate(t *testing.T) {
	c := pgtest.Shared(t)
	ctx := context.Background()
	a, err := pgx.Connect(ctx, c.NewDatabase(t))
	require.NoError(t, err)
	defer a.Close(ctx)
	b, err := pgx.Connect(ctx, c.NewDatabase(t))
	require.NoError(t, err)
	defer b.Close(ctx)

	_, err = a.Exec(ctx, "CREATE TABLE only_in_a (id int)")
	require.NoError(t, err)
	var n int
	require.NoError(t, a.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE tablename = 'only_in_a'").Scan(&n))
	assert.Equal(t, 1, n)
	require.NoError(t, b.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE tablename = 'only_in_a'").Scan(&n))
	assert.Equal(t, 0, n)
}

func TestTheServerIsVersion15OrLaterAndSupportsNullsNotDistinct(t *testing.T) {
	c := pgtest.Shared(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.NewDatabase(t))
	require.NoError(t, err)
	defer conn.Close(ctx)
	assert.GreaterOrEqual(t, c.Version, pgtest.MinVersion)
	_, err = conn.Exec(ctx, "CREATE TABLE k (id text UNIQUE NULLS NOT DISTINCT)")
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "INSERT INTO k VALUES (NULL)")
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "INSERT INTO k VALUES (NULL)")
	assert.ErrorContains(t, err, "duplicate key", "a second NULL key conflicts")
}

func TestTCPConnectionsNeedThePassword(t *testing.T) {
	c := pgtest.Shared(t)
	ctx := context.Background()
	wrong := strings.Replace(c.DSN("postgres"), c.Password, "not-"+c.Password, 1)
	_, err := pgx.Connect(ctx, wrong)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "password authentication failed")
	conn, err := pgx.Connect(ctx, c.DSN("postgres"))
	require.NoError(t, err)
	conn.Close(ctx)
}

// fakeTB records how SkipOrFail ends a test.
type fakeTB struct {
	testing.TB
	skipped, failed bool
}

func (f *fakeTB) Helper()                  {}
func (f *fakeTB) Skipf(string, ...any)     { f.skipped = true }
func (f *fakeTB) Fatal(...any)             { f.failed = true }
func (f *fakeTB) Fatalf(string, ...any)    { f.failed = true }
func (f *fakeTB) Logf(string, ...any)      {}
func (f *fakeTB) Cleanup(func())           {}
func (f *fakeTB) Setenv(key, value string) {}

func TestMissingBinariesSkipOutsideCIAndFailInCI(t *testing.T) {
	missing := fmt.Errorf("%w: none here", pgtest.ErrNoServer)
	for _, tc := range []struct {
		name       string
		ci         string
		err        error
		skip, fail bool
	}{
		{name: "missing outside CI skips", ci: "", err: missing, skip: true},
		{name: "missing in CI fails", ci: "true", err: missing, fail: true},
		{name: "other start errors fail outside CI", ci: "", err: errors.New("initdb: disk full"), fail: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("CI", tc.ci)
			if tc.ci == "" {
				os.Unsetenv("CI")
			}
			f := &fakeTB{}
			pgtest.SkipOrFail(f, tc.err)
			assert.Equal(t, tc.skip, f.skipped, "skipped")
			assert.Equal(t, tc.fail, f.failed, "failed")
		})
	}
}

// TestHelperProcessStartsAClusterAndExits is the child of
// TestTheWatcherStopsTheClusterWhenTheProcessExits.
func TestHelperProcessStartsAClusterAndExits(t *testing.T) {
	if os.Getenv("PGTEST_HELPER_PROCESS") != "1" {
		t.Skip("run by TestTheWatcherStopsTheClusterWhenTheProcessExits")
	}
	c, err := pgtest.Start(context.Background(), pgtest.Options{})
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(3)
	}
	fmt.Println("CLUSTER", c.Dir, c.Addr())
	os.Exit(0) // no Stop: the watcher must clean up
}

func TestTheWatcherStopsTheClusterWhenTheProcessExits(t *testing.T) {
	if _, err := pgtest.BinDir(); err != nil {
		pgtest.SkipOrFail(t, err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcessStartsAClusterAndExits$")
	cmd.Env = append(os.Environ(), "PGTEST_HELPER_PROCESS=1")
	out, err := cmd.Output()
	require.NoError(t, err, "helper output: %s", out)
	var dir, addr string
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 3 && f[0] == "CLUSTER" {
			dir, addr = f[1], f[2]
		}
	}
	require.NotEmpty(t, dir, "helper output: %s", out)

	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		_, statErr := os.Stat(dir)
		conn, dialErr := net.DialTimeout("tcp", addr, time.Second)
		if dialErr == nil {
			conn.Close()
		}
		if os.IsNotExist(statErr) && dialErr != nil {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("20 s after its process exited, the cluster in %s (%s) is still there", dir, addr)
}

package pgsink_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/beamdedup/beamdedup/testing/pgtest"
	"github.com/beamdedup/beamdedup/testing/prismtest"
)

// exampleDSN is the environment variable ExampleWrite reads its database
// from.
const exampleDSN = "BEAMDEDUP_EXAMPLE_DSN"

// TestMain runs the package's pipelines on Prism without bundle splitting
// (notes/beam-defects.md 9), and gives ExampleWrite a database of the
// package's throwaway cluster unless exampleDSN names one. Without the
// server binaries the example is skipped outside CI, like the tests
// against PostgreSQL; in CI it fails.
func TestMain(m *testing.M) {
	if os.Getenv(exampleDSN) == "" {
		if err := exampleDatabase(); err != nil {
			if !errors.Is(err, pgtest.ErrNoServer) || os.Getenv("CI") != "" {
				fmt.Fprintln(os.Stderr, "pgsink tests:", err)
				os.Exit(1)
			}
			fmt.Fprintf(os.Stderr, "pgsink tests: ExampleWrite skipped: %v\n", err)
			flag.Set("test.skip", "^ExampleWrite$")
		}
	}
	prismtest.Main(m)
}

// exampleDatabase creates a database for ExampleWrite in the shared
// cluster and puts its DSN in exampleDSN.
func exampleDatabase() error {
	c, err := pgtest.SharedCluster()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn, err := c.CreateDatabase(ctx, "example_write")
	if err != nil {
		return err
	}
	return os.Setenv(exampleDSN, dsn)
}

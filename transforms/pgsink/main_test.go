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

// exampleDSN is ExampleWrite's database, in the package's throwaway
// cluster (TestMain).
var exampleDSN string

// TestMain runs the package's pipelines on Prism without bundle splitting
// (notes/beam-defects.md 9), and gives ExampleWrite a database of the
// package's throwaway cluster. Without the server binaries the example is
// skipped outside CI, like the tests against PostgreSQL; in CI it fails.
func TestMain(m *testing.M) {
	if err := exampleDatabase(); err != nil {
		if !errors.Is(err, pgtest.ErrNoServer) || os.Getenv("CI") != "" {
			fmt.Fprintln(os.Stderr, "pgsink tests:", err)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "pgsink tests: ExampleWrite skipped: %v\n", err)
		flag.Set("test.skip", "^ExampleWrite$")
	}
	prismtest.Main(m)
}

// exampleDatabase creates ExampleWrite's database in the shared cluster.
func exampleDatabase() error {
	c, err := pgtest.SharedCluster()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	exampleDSN, err = c.CreateDatabase(ctx, "example_write")
	return err
}

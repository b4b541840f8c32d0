// Package depstest holds the layers to their order, with no exceptions:
// cmd → pipelines → transforms → coders, with the module's internal
// packages beside them for the programs, the samples, the tests and the
// runtimes the library shares. A Beam Go worker binary carries everything
// the user's pipeline imports, and it is staged with every job: a runner,
// a test fake or a Docker client linked by a library or sample package
// would ride along in every user's workers (and their init functions would
// run there); no product binary links a test fake; and no package's tests
// run through a sample built on the package itself. The checks are
// `go list -deps`, which leaves out test files, and the packages' test
// imports.
package depstest

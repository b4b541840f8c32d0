// Package depstest checks what the library packages link. A Beam Go
// worker binary carries everything the user's pipeline imports, and it is
// staged with every job: a runner, a test fake or a Docker client linked
// by a library package would ride along in every user's workers (and
// their init functions would run there). The check is `go list -deps`,
// which leaves out test files.
package depstest

// Package loopback makes a TCP listener that a library opened on every
// interface reachable from this machine only: Beam v2.77.0's Prism job
// server and Beam Go's worker pool listen on ":port" whatever their caller
// wants (notes/beam-defects.md, "Prism's job server listens on every
// interface").
//
// Restrict attaches to this process's listening sockets on a port a socket
// filter that drops every packet whose source is not loopback (127.0.0.0/8,
// ::1): a connection from elsewhere never completes its handshake, and the
// connections accepted inherit the filter. Linux only.
//
// An MPTCP socket (net.Listen's default since Go 1.24 where the kernel has
// it) takes no socket filter, so Listen opens the library's listener with
// GODEBUG multipathtcp=0, then restricts it.
package loopback

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync"
)

// ErrUnsupported is Restrict's error where socket filters are not
// available (any system but Linux).
var ErrUnsupported = errors.New("loopback: restricting a listener needs Linux socket filters")

// Restrict attaches the loopback-only filter to every listening TCP socket
// of this process on port. It fails when there is none, or when one cannot
// take the filter (an MPTCP socket: open it with Listen).
func Restrict(port int) error {
	n, err := restrict(port)
	if err != nil {
		return fmt.Errorf("loopback: port %d: %w", port, err)
	}
	if n == 0 {
		return fmt.Errorf("loopback: this process has no listening TCP socket on port %d", port)
	}
	return nil
}

// Listen calls open, which makes a library listen on port with net.Listen
// (Prism's prism.CreateJobServer, say), with Multipath TCP off, and then
// restricts the listener to this machine (Restrict).
func Listen(port int, open func() error) error {
	if err := withoutMPTCP(open); err != nil {
		return err
	}
	return Restrict(port)
}

var envMu sync.Mutex

// withoutMPTCP runs f with multipathtcp=0 added to GODEBUG, which
// net.Listen reads at each call (a listener opened meanwhile elsewhere in
// the process is plain TCP too, which changes nothing for its clients).
func withoutMPTCP(f func() error) error {
	envMu.Lock()
	defer envMu.Unlock()
	old, had := os.LookupEnv("GODEBUG")
	v := "multipathtcp=0"
	if old != "" {
		v = old + "," + v // the later setting of a name wins
	}
	if err := os.Setenv("GODEBUG", v); err != nil {
		return err
	}
	defer func() {
		if had {
			os.Setenv("GODEBUG", old)
		} else {
			os.Unsetenv("GODEBUG")
		}
	}()
	return f()
}

// Listener is a listening TCP socket of this process.
type Listener struct {
	Addr netip.AddrPort
	// Restricted: the socket carries the loopback-only filter.
	Restricted bool

	fd int
}

// Reachable reports whether other hosts can connect: the socket is bound
// to an address that is not loopback and carries no filter.
func (l Listener) Reachable() bool {
	return !l.Restricted && !l.Addr.Addr().IsLoopback()
}

// Listeners lists the listening TCP sockets of this process.
func Listeners() ([]Listener, error) { return listeners() }

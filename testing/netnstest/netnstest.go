// Package netnstest gives a test a second host on this machine: a network
// namespace of its own joined to the test's by a veth pair, from which
// the test dials the host's side of the pair as a machine on the network
// would. A listener that answers there is reachable from other hosts; one
// bound to loopback, or restricted to it, is not.
//
//	ns := netnstest.New(t)                  // removed at cleanup
//	c, err := ns.Dial("tcp", ns.HostAddr(port), time.Second)
//
// It needs root and iproute2's ip command; without them New skips the
// test.
package netnstest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Netns is a network namespace with one veth link to the test's own.
type Netns struct {
	// Name is the namespace's name (ip netns).
	Name string
	// Host is the address of the test's side of the link; Peer is the
	// namespace's.
	Host, Peer net.IP
}

var seq atomic.Int32

// New creates the namespace and its link, with addresses in a /30 of
// 10.231.0.0/16 chosen from the process id, and removes both when the test
// ends. It skips the test when it cannot run them (not root, no ip).
func New(t testing.TB) *Netns {
	t.Helper()
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		t.Skip("netnstest: network namespaces need root on Linux")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("netnstest: no ip command (Debian package iproute2)")
	}
	n := int(seq.Add(1))
	slot := (os.Getpid()*8 + n) % (1 << 14) // a /30 of 10.231.0.0/16
	id := fmt.Sprintf("%d-%d", os.Getpid(), n)
	ns := &Netns{
		Name: "beamdedup-" + id,
		Host: net.IPv4(10, 231, byte(slot>>6), byte(slot&63)<<2|1),
		Peer: net.IPv4(10, 231, byte(slot>>6), byte(slot&63)<<2|2),
	}
	hostLink, peerLink := "bdh"+id, "bdp"+id
	if len(hostLink) > 15 { // an interface name has at most 15 bytes
		hostLink, peerLink = hostLink[:15], peerLink[:15]
	}
	ip := func(args ...string) {
		t.Helper()
		out, err := exec.Command("ip", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("netnstest: ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	ip("netns", "add", ns.Name)
	// Deleting the namespace deletes its end of the pair, and so the pair.
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns.Name).Run() })
	ip("link", "add", hostLink, "type", "veth", "peer", "name", peerLink)
	ip("link", "set", peerLink, "netns", ns.Name)
	ip("addr", "add", ns.Host.String()+"/30", "dev", hostLink)
	ip("link", "set", hostLink, "up")
	ip("-n", ns.Name, "addr", "add", ns.Peer.String()+"/30", "dev", peerLink)
	ip("-n", ns.Name, "link", "set", peerLink, "up")
	ip("-n", ns.Name, "link", "set", "lo", "up")
	return ns
}

// HostAddr is host:port on the test's side of the link: where a client in
// the namespace reaches a listener of the test's on every interface.
func (ns *Netns) HostAddr(port int) string {
	return net.JoinHostPort(ns.Host.String(), strconv.Itoa(port))
}

// Dial connects from inside the namespace. The socket is made on an OS
// thread that joined the namespace (a socket stays in the namespace it was
// made in); that thread is never reused.
func (ns *Netns) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		// Not unlocked: the thread ends with the goroutine instead of
		// going back to the scheduler in the wrong namespace.
		runtime.LockOSThread()
		f, err := os.Open("/var/run/netns/" + ns.Name)
		if err != nil {
			done <- result{nil, err}
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- result{nil, fmt.Errorf("netnstest: joining %s: %w", ns.Name, err)}
			return
		}
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		done <- result{c, err}
	}()
	r := <-done
	return r.c, r.err
}

// DialTimeout is Dial with a timeout.
func (ns *Netns) DialTimeout(network, addr string, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return ns.Dial(ctx, network, addr)
}

// GRPC returns a gRPC client connection to addr whose connections are
// made from inside the namespace.
func (ns *Netns) GRPC(addr string) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return ns.Dial(ctx, "tcp", a) }))
}

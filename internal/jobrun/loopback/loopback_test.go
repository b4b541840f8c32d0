package loopback_test

import (
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/internal/jobrun/loopback"
	"github.com/beamdedup/beamdedup/testing/netnstest"
)

// serve accepts connections on l and writes "ok" on each.
func serve(t *testing.T, l net.Listener) int {
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("ok"))
			c.Close()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

// answers reports whether a connection to addr made by dial reads "ok".
func answers(dial func() (net.Conn, error)) error {
	c, err := dial()
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	b := make([]byte, 2)
	if _, err := c.Read(b); err != nil {
		return err
	}
	return nil
}

// A listener on every interface, as Beam opens them: after Listen it
// answers clients on this machine (IPv4 and IPv6 loopback) and no one on
// another host, while a listener beside it without the filter answers
// that host (the control: the other host does reach this one).
func TestListen_ALibrarysListenerOnEveryInterfaceAnswersOnlyThisMachine(t *testing.T) {
	ns := netnstest.New(t)
	open := func(port int) *net.Listener {
		l := new(net.Listener)
		var err error
		*l, err = net.Listen("tcp", ":"+strconv.Itoa(port))
		require.NoError(t, err)
		return l
	}
	var l *net.Listener
	port := freePort(t)
	require.NoError(t, loopback.Listen(port, func() error { l = open(port); return nil }))
	serve(t, *l)
	control := serve(t, *open(0))

	for _, host := range []string{"127.0.0.1", "::1", "localhost"} {
		assert.NoError(t, answers(func() (net.Conn, error) {
			return net.DialTimeout("tcp", net.JoinHostPort(host, strconv.Itoa(port)), 2*time.Second)
		}), "from this machine via %s", host)
	}
	require.NoError(t, answers(func() (net.Conn, error) {
		return ns.DialTimeout("tcp", ns.HostAddr(control), 2*time.Second)
	}), "control: another host reaches an unfiltered listener of this one")
	err := answers(func() (net.Conn, error) { return ns.DialTimeout("tcp", ns.HostAddr(port), 2*time.Second) })
	assert.Error(t, err, "another host reaches the restricted listener")

	ls, err := loopback.Listeners()
	require.NoError(t, err)
	i := slices.IndexFunc(ls, func(l loopback.Listener) bool { return int(l.Addr.Port()) == port })
	require.GreaterOrEqual(t, i, 0, "listed: %v", ls)
	assert.True(t, ls[i].Restricted)
	assert.False(t, ls[i].Reachable())
	j := slices.IndexFunc(ls, func(l loopback.Listener) bool { return int(l.Addr.Port()) == control })
	require.GreaterOrEqual(t, j, 0, "listed: %v", ls)
	assert.True(t, ls[j].Reachable())
}

func TestRestrict_FailsWithoutAListenerOnThePort(t *testing.T) {
	assert.ErrorContains(t, loopback.Restrict(freePort(t)), "no listening TCP socket")
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

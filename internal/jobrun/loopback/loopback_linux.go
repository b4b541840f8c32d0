package loopback

import (
	"net/netip"
	"os"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The filter, classic BPF run on each packet the socket receives (a TCP
// listener's SYNs, then each accepted connection's segments). Loads at
// unix.SKF_NET_OFF are relative to the IP header; word loads are in
// network byte order.
var filter = func() []unix.SockFilter {
	const (
		net     = uint32(0xfff00000) // unix.SKF_NET_OFF as the unsigned k of a load
		accept  = 0xffffffff
		ldb     = unix.BPF_LD | unix.BPF_B | unix.BPF_ABS
		ldw     = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		rsh     = unix.BPF_ALU | unix.BPF_RSH | unix.BPF_K
		and     = unix.BPF_ALU | unix.BPF_AND | unix.BPF_K
		jeq     = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		ret     = unix.BPF_RET | unix.BPF_K
		version = 0
	)
	// Jumps count the instructions skipped, forward only.
	return []unix.SockFilter{
		/* 0 */ {Code: ldb, K: net + version},
		/* 1 */ {Code: rsh, K: 4},
		/* 2 */ {Code: jeq, K: 4, Jt: 0, Jf: 3}, // IPv4, else 6
		/* 3 */ {Code: ldw, K: net + 12}, // its source address
		/* 4 */ {Code: and, K: 0xff000000},
		/* 5 */ {Code: jeq, K: 0x7f000000, Jt: 9, Jf: 10}, // 127.0.0.0/8: accept, else drop
		/* 6 */ {Code: jeq, K: 6, Jt: 0, Jf: 9}, // IPv6, else drop
		/* 7 */ {Code: ldw, K: net + 8}, // its source address, ::1, word by word
		/* 8 */ {Code: jeq, K: 0, Jt: 0, Jf: 7},
		/* 9 */ {Code: ldw, K: net + 12},
		/* 10 */ {Code: jeq, K: 0, Jt: 0, Jf: 5},
		/* 11 */ {Code: ldw, K: net + 16},
		/* 12 */ {Code: jeq, K: 0, Jt: 0, Jf: 3},
		/* 13 */ {Code: ldw, K: net + 20},
		/* 14 */ {Code: jeq, K: 1, Jt: 0, Jf: 1},
		/* 15 */ {Code: ret, K: accept},
		/* 16 */ {Code: ret, K: 0}, // drop
	}
}()

func restrict(port int) (int, error) {
	ls, err := listeners()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, l := range ls {
		if int(l.Addr.Port()) != port {
			continue
		}
		prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
		if err := unix.SetsockoptSockFprog(l.fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &prog); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// listeners are this process's listening TCP sockets, by descriptor.
func listeners() ([]Listener, error) {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil, err
	}
	var ls []Listener
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if t, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE); err != nil || t != unix.SOCK_STREAM {
			continue // not a socket, or not TCP
		}
		if l, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN); err != nil || l != 1 {
			continue
		}
		sa, err := unix.Getsockname(fd)
		if err != nil {
			continue
		}
		l := Listener{Restricted: filtered(fd), fd: fd}
		switch a := sa.(type) {
		case *unix.SockaddrInet4:
			l.Addr = netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port))
		case *unix.SockaddrInet6:
			l.Addr = netip.AddrPortFrom(netip.AddrFrom16(a.Addr), uint16(a.Port))
		default:
			continue
		}
		ls = append(ls, l)
	}
	return ls, nil
}

// filtered reports whether a socket filter is attached to fd: with a zero
// length, SO_GET_FILTER writes the filter's instruction count into the
// length.
func filtered(fd int) bool {
	var n uint32
	_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_GET_FILTER, 0, uintptr(unsafe.Pointer(&n)), 0)
	return errno == 0 && n > 0
}

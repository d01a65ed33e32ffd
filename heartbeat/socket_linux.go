package heartbeat

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// On Linux the server's socket is a plain blocking one, outside Go's
// network poller: the poller is edge-triggered, so at tens of thousands of
// datagrams a second an idle thread of the runtime would wake for each
// one, and those wake-ups would cost more than the datagrams. Readers
// block in recvmmsg on their own threads, reading and answering up to
// batchSize datagrams per system call (recvmmsg, sendmmsg).

// batchSize is how many datagrams one recvmmsg reads at most.
const batchSize = 256

// socket is a bound UDP socket.
type socket struct {
	fd     int
	local  *net.UDPAddr
	closed atomic.Bool
}

func listenSocket(addr string) (*socket, error) {
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, err
	}
	ip := ua.IP
	family, sa := unix.AF_INET6, unix.Sockaddr(&unix.SockaddrInet6{Port: ua.Port})
	if ip4 := ip.To4(); ip4 != nil && !ip.IsUnspecified() {
		family, sa = unix.AF_INET, &unix.SockaddrInet4{Port: ua.Port, Addr: [4]byte(ip4)}
	} else if ip != nil && !ip.IsUnspecified() {
		s6 := &unix.SockaddrInet6{Port: ua.Port}
		copy(s6.Addr[:], ip.To16())
		sa = s6
	}
	fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if err != nil {
		return nil, err
	}
	if family == unix.AF_INET6 {
		unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 0) // IPv4 too, as net.ListenUDP does
	}
	// Beats come in bursts; larger buffers drop fewer under load.
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 4<<20)
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 4<<20)
	// A blocked reader wakes this often to see that the server closed.
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 200_000})
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return nil, &net.OpError{Op: "listen", Net: "udp", Addr: ua, Err: err}
	}
	s := &socket{fd: fd}
	switch got := must(unix.Getsockname(fd)).(type) {
	case *unix.SockaddrInet4:
		s.local = &net.UDPAddr{IP: net.IP(got.Addr[:]).To16(), Port: got.Port}
	case *unix.SockaddrInet6:
		s.local = &net.UDPAddr{IP: net.IP(got.Addr[:]), Port: got.Port}
	}
	return s, nil
}

func must(sa unix.Sockaddr, err error) unix.Sockaddr {
	if err != nil {
		return nil
	}
	return sa
}

func (s *socket) addr() *net.UDPAddr { return s.local }

// close marks the socket closed; the readers see it within their receive
// timeout, and release closes the descriptor once they are gone.
func (s *socket) close() { s.closed.Store(true) }

func (s *socket) release() error { return unix.Close(s.fd) }

// writeTo sends one datagram (a poke).
func (s *socket) writeTo(b []byte, to netip.AddrPort) error {
	if s.closed.Load() {
		return net.ErrClosed
	}
	var sa unix.Sockaddr
	if a := to.Addr(); a.Is4() && s.local.IP.To4() != nil && !s.local.IP.IsUnspecified() {
		sa = &unix.SockaddrInet4{Port: int(to.Port()), Addr: a.As4()}
	} else {
		sa = &unix.SockaddrInet6{Port: int(to.Port()), Addr: a.As16()}
	}
	return unix.Sendto(s.fd, b, unix.MSG_DONTWAIT, sa)
}

// mmsghdr is struct mmsghdr: a message header and the length received.
type mmsghdr struct {
	hdr unix.Msghdr
	n   uint32
	_   [4]byte
}

// batchIO is one reader's buffers for recvmmsg and sendmmsg.
type batchIO struct {
	s *socket

	in    [batchSize]mmsghdr
	iov   [batchSize]unix.Iovec
	names [batchSize]unix.RawSockaddrInet6
	bufs  [batchSize][512]byte
	n     int

	out  [batchSize]mmsghdr
	oiov [batchSize]unix.Iovec
	obuf [batchSize][Size]byte
	nout int
}

func (s *socket) newBatch() *batchIO {
	b := &batchIO{s: s}
	for i := range b.in {
		b.iov[i] = unix.Iovec{Base: &b.bufs[i][0]}
		b.iov[i].SetLen(len(b.bufs[i]))
		b.in[i].hdr.Iov = &b.iov[i]
		b.in[i].hdr.SetIovlen(1)
		b.oiov[i] = unix.Iovec{Base: &b.obuf[i][0]}
		b.oiov[i].SetLen(Size)
		b.out[i].hdr.Iov = &b.oiov[i]
		b.out[i].hdr.SetIovlen(1)
	}
	return b
}

// read blocks until datagrams come and reads up to batchSize of them; it
// returns net.ErrClosed once the socket is closed.
func (b *batchIO) read() error {
	for i := range b.in {
		b.in[i].hdr.Name = (*byte)(unsafe.Pointer(&b.names[i]))
		b.in[i].hdr.Namelen = uint32(unsafe.Sizeof(b.names[i]))
		b.in[i].hdr.Flags = 0
	}
	b.n = 0
	for !b.s.closed.Load() {
		r, _, e := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(b.s.fd), uintptr(unsafe.Pointer(&b.in[0])), batchSize, unix.MSG_WAITFORONE, 0, 0)
		switch e {
		case 0:
			b.n = int(r)
			return nil
		case unix.EAGAIN, unix.EINTR: // the receive timeout: look at closed
		default:
			return e
		}
	}
	return net.ErrClosed
}

// pause lets datagrams gather for d.
func (b *batchIO) pause(d time.Duration) {
	ts := unix.NsecToTimespec(int64(d))
	unix.Nanosleep(&ts, nil)
}

// datagram returns the i-th datagram read and its sender.
func (b *batchIO) datagram(i int) ([]byte, netip.AddrPort) {
	sa := &b.names[i]
	var addr netip.AddrPort
	switch sa.Family {
	case unix.AF_INET:
		v4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		addr = netip.AddrPortFrom(netip.AddrFrom4(v4.Addr), binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&v4.Port))[:]))
	case unix.AF_INET6:
		addr = netip.AddrPortFrom(netip.AddrFrom16(sa.Addr).Unmap(), binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:]))
	}
	return b.bufs[i][:b.in[i].n], addr
}

// next returns the buffer the next answer is written into.
func (b *batchIO) next() []byte { return b.obuf[b.nout][:] }

// queue queues the answer written into next() for the sender of the i-th
// datagram; flush sends it.
func (b *batchIO) queue(i int) {
	o := &b.out[b.nout]
	o.hdr.Name = (*byte)(unsafe.Pointer(&b.names[i]))
	o.hdr.Namelen = b.in[i].hdr.Namelen
	b.nout++
}

// flush sends the queued answers. A full socket buffer drops the rest:
// the agents ask again.
func (b *batchIO) flush() error {
	n := b.nout
	b.nout = 0
	for sent := 0; sent < n; {
		r, _, e := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(b.s.fd), uintptr(unsafe.Pointer(&b.out[sent])), uintptr(n-sent), unix.MSG_DONTWAIT, 0, 0)
		switch {
		case e == unix.EINTR:
			continue
		case e == unix.EAGAIN:
			return nil
		case e != 0:
			return e
		case r == 0:
			return errors.New("sendmmsg sent nothing")
		}
		sent += int(r)
	}
	return nil
}

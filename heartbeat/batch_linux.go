package heartbeat

import (
	"encoding/binary"
	"net"
	"net/netip"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// batchSize is how many datagrams one recvmmsg reads at most.
const batchSize = 256

// mmsghdr is struct mmsghdr: a message header and the length received.
type mmsghdr struct {
	hdr unix.Msghdr
	n   uint32
	_   [4]byte
}

// batchIO reads and answers datagrams many per system call (recvmmsg,
// sendmmsg): under load the system calls, not the checks, are what a beat
// costs. One per reading goroutine.
type batchIO struct {
	rc syscall.RawConn

	in    [batchSize]mmsghdr
	iov   [batchSize]unix.Iovec
	names [batchSize]unix.RawSockaddrInet6
	bufs  [batchSize][512]byte
	n     int

	out    [batchSize]mmsghdr
	oiov   [batchSize]unix.Iovec
	obufs  [batchSize][Size]byte
	nout   int
	failed error
}

func newBatchIO(conn *net.UDPConn) *batchIO {
	rc, err := conn.SyscallConn()
	if err != nil {
		return nil
	}
	b := &batchIO{rc: rc}
	for i := range b.in {
		b.iov[i] = unix.Iovec{Base: &b.bufs[i][0]}
		b.iov[i].SetLen(len(b.bufs[i]))
		b.in[i].hdr.Iov = &b.iov[i]
		b.in[i].hdr.SetIovlen(1)
		b.oiov[i] = unix.Iovec{Base: &b.obufs[i][0]}
		b.oiov[i].SetLen(Size)
		b.out[i].hdr.Iov = &b.oiov[i]
		b.out[i].hdr.SetIovlen(1)
	}
	return b
}

// read waits for datagrams and reads up to batchSize of them. It waits in
// poll(2) on its own thread, not in Go's network poller: at tens of
// thousands of datagrams a second the poller's wake-ups cost more than the
// datagrams. It returns net.ErrClosed once closed is set.
func (b *batchIO) read(closed *atomic.Bool) error {
	for i := range b.in {
		b.in[i].hdr.Name = (*byte)(unsafe.Pointer(&b.names[i]))
		b.in[i].hdr.Namelen = uint32(unsafe.Sizeof(b.names[i]))
		b.in[i].hdr.Flags = 0
	}
	b.n = 0
	var errno syscall.Errno
	err := b.rc.Control(func(fd uintptr) {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for !closed.Load() {
			r, _, e := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&b.in[0])), batchSize, unix.MSG_DONTWAIT, 0, 0)
			switch e {
			case 0:
				b.n = int(r)
				return
			case unix.EAGAIN, unix.EINTR:
				unix.Poll(pfd, 200) // wakes to see closed
			default:
				errno = e
				return
			}
		}
	})
	if err != nil {
		return err
	}
	if closed.Load() {
		return net.ErrClosed
	}
	if errno != 0 {
		return errno
	}
	return nil
}

// pause lets datagrams gather for d, on this thread.
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
		addr = netip.AddrPortFrom(netip.AddrFrom16(sa.Addr), binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:]))
	}
	return b.bufs[i][:b.in[i].n], addr
}

// next returns the buffer the next answer is written into.
func (b *batchIO) next() []byte { return b.obufs[b.nout][:] }

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
	if b.nout == 0 {
		return nil
	}
	var errno syscall.Errno
	err := b.rc.Control(func(fd uintptr) {
		for sent := 0; sent < b.nout; {
			r, _, e := unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&b.out[sent])), uintptr(b.nout-sent), unix.MSG_DONTWAIT, 0, 0)
			if e == unix.EINTR {
				continue
			}
			if e != 0 || r == 0 {
				errno = e
				return
			}
			sent += int(r)
		}
	})
	b.nout = 0
	if err == nil && errno != 0 && errno != unix.EAGAIN {
		err = errno
	}
	return err
}

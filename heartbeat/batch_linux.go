package heartbeat

import (
	"encoding/binary"
	"net"
	"net/netip"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// batchSize is how many datagrams one recvmmsg reads at most.
const batchSize = 64

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

// read waits for datagrams and reads up to batchSize of them.
func (b *batchIO) read() error {
	for i := range b.in {
		b.in[i].hdr.Name = (*byte)(unsafe.Pointer(&b.names[i]))
		b.in[i].hdr.Namelen = uint32(unsafe.Sizeof(b.names[i]))
		b.in[i].hdr.Flags = 0
	}
	var errno syscall.Errno
	err := b.rc.Read(func(fd uintptr) bool {
		r, _, e := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&b.in[0])), batchSize, unix.MSG_DONTWAIT, 0, 0)
		if e == unix.EAGAIN || e == unix.EINTR {
			return false
		}
		b.n, errno = int(r), e
		return true
	})
	if err != nil {
		return err
	}
	if errno != 0 {
		b.n = 0
		return errno
	}
	return nil
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
// the agents ask again next interval.
func (b *batchIO) flush() error {
	sent := 0
	for sent < b.nout {
		var r uintptr
		var errno syscall.Errno
		err := b.rc.Write(func(fd uintptr) bool {
			r, _, errno = unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&b.out[sent])), uintptr(b.nout-sent), unix.MSG_DONTWAIT, 0, 0)
			return errno != unix.EAGAIN && errno != unix.EINTR
		})
		if err != nil || errno != 0 || r == 0 {
			b.nout = 0
			if err == nil && errno != 0 {
				err = errno
			}
			return err
		}
		sent += int(r)
	}
	b.nout = 0
	return nil
}

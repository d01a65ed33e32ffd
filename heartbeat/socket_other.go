//go:build !linux

package heartbeat

import (
	"net"
	"net/netip"
	"time"
)

// batchSize is how many datagrams one read returns at most: one here.
const batchSize = 1

// socket is a UDP socket through the net package.
type socket struct{ conn *net.UDPConn }

func listenSocket(addr string) (*socket, error) {
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, err
	}
	conn, err := net.ListenUDP("udp", ua)
	if err != nil {
		return nil, err
	}
	conn.SetReadBuffer(4 << 20)
	conn.SetWriteBuffer(4 << 20)
	return &socket{conn: conn}, nil
}

func (s *socket) addr() *net.UDPAddr { return s.conn.LocalAddr().(*net.UDPAddr) }

func (s *socket) close() { s.conn.Close() }

func (s *socket) release() error { return nil }

func (s *socket) writeTo(b []byte, to netip.AddrPort) error {
	_, err := s.conn.WriteToUDPAddrPort(b, to)
	return err
}

// batchIO reads one datagram per system call where recvmmsg is missing.
type batchIO struct {
	s     *socket
	buf   [512]byte
	n     int
	len   int
	from  netip.AddrPort
	out   [Size]byte
	reply bool
}

func (s *socket) newBatch() *batchIO { return &batchIO{s: s} }

func (b *batchIO) read() error {
	n, from, err := b.s.conn.ReadFromUDPAddrPort(b.buf[:])
	if err != nil {
		b.n = 0
		return err
	}
	b.n, b.len, b.from = 1, n, from
	return nil
}

func (b *batchIO) pause(d time.Duration) { time.Sleep(d) }

func (b *batchIO) datagram(int) ([]byte, netip.AddrPort) { return b.buf[:b.len], b.from }

func (b *batchIO) next() []byte { return b.out[:] }

func (b *batchIO) queue(int) { b.reply = true }

func (b *batchIO) flush() error {
	if !b.reply {
		return nil
	}
	b.reply = false
	_, err := b.s.conn.WriteToUDPAddrPort(b.out[:], b.from)
	return err
}

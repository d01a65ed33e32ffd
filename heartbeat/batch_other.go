//go:build !linux

package heartbeat

import (
	"net"
	"net/netip"
	"sync/atomic"
	"time"
)

// batchSize is how many datagrams one read returns at most: one here.
const batchSize = 1

// batchIO reads one datagram per system call where recvmmsg is missing.
type batchIO struct {
	conn  *net.UDPConn
	buf   [512]byte
	n     int
	len   int
	from  netip.AddrPort
	out   [Size]byte
	reply bool
}

func newBatchIO(conn *net.UDPConn) *batchIO { return &batchIO{conn: conn} }

func (b *batchIO) read(closed *atomic.Bool) error {
	n, from, err := b.conn.ReadFromUDPAddrPort(b.buf[:])
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
	_, err := b.conn.WriteToUDPAddrPort(b.out[:], b.from)
	return err
}

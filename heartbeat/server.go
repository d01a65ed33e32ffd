package heartbeat

import (
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"time"
)

// Server receives beats on a UDP socket, checks them and records them in
// its Table, and answers those that ask (FlagAck) with an ack, and any
// whose agent must do a full sync with a KindSync. It also sends the
// Table's pokes. On Linux each reader reads and answers up to 256
// datagrams per system call, on a socket kept out of Go's network poller
// (socket_linux.go). Create it with Listen; Close stops it. It is safe for
// concurrent use.
type Server struct {
	table  *Table
	sock   *socket
	logger *slog.Logger
	wg     sync.WaitGroup

	mu   sync.Mutex // guards psig and pbuf (pokes come from any goroutine)
	psig signer
	pbuf [Size]byte
}

// Listen opens a UDP socket on addr (HOST:PORT) and serves it with one
// reader per four CPUs (one at least): each reads, checks and answers
// datagrams on its own, without allocating. Pokes of t go out through it
// from now on.
func Listen(addr string, t *Table, logger *slog.Logger) (*Server, error) {
	sock, err := listenSocket(addr)
	if err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{table: t, sock: sock, logger: logger}
	s.psig.init()
	poke := s.poke
	t.poke.Store(&poke)
	for range max(1, runtime.GOMAXPROCS(0)/4) {
		s.wg.Add(1)
		go s.read()
	}
	return s, nil
}

// Addr returns the address the server listens on.
func (s *Server) Addr() *net.UDPAddr { return s.sock.addr() }

// Close stops the server and waits for its readers.
func (s *Server) Close() error {
	s.table.poke.Store(nil)
	s.sock.close()
	s.wg.Wait()
	return s.sock.release()
}

func (s *Server) read() {
	defer s.wg.Done()
	var sig signer
	sig.init()
	b := s.sock.newBatch()
	for {
		if err := b.read(); err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			s.logger.Warn("heartbeat read", "err", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		for i := range b.n {
			d, src := b.datagram(i)
			if _, ok := s.table.handle(d, src, &sig, b.next()); ok {
				b.queue(i)
			}
		}
		if err := b.flush(); err != nil {
			s.logger.Debug("heartbeat answers", "err", err)
		}
		// Under moderate load, let datagrams gather for a moment rather
		// than wake for each: the wake-ups, not the checks, would cost the
		// most. A full or nearly full batch means a backlog: read on.
		if b.n > 0 && b.n < batchSize/2 {
			b.pause(coalesce)
		}
	}
}

// coalesce is how long a reader that found few datagrams waiting lets more
// gather before it reads again. Beats are late by at most that.
const coalesce = 8 * time.Millisecond

// poke sends machine id's agent a KindPoke at the address of its last beat.
func (s *Server) poke(id int64) {
	t := s.table
	now := t.Now()
	sh := t.shard(id)
	sh.mu.Lock()
	e := sh.m[id]
	if e == nil || !e.addr.IsValid() {
		sh.mu.Unlock()
		return
	}
	addr := e.addr
	epoch := t.keys.Epoch(now)
	key := t.keyLocked(e, epoch)
	sh.mu.Unlock()
	m := Message{Kind: KindPoke, Flags: FlagDesired, MachineID: id, Seq: now.UnixMicro(), TimeUS: now.UnixMicro(), Epoch: epoch}
	s.mu.Lock()
	s.psig.seal(&m, &key, s.pbuf[:])
	err := s.sock.writeTo(s.pbuf[:], addr)
	s.mu.Unlock()
	if err == nil {
		t.stats.Pokes.Add(1)
	}
}

// keyLocked returns e's key for epoch, from its cache or derived (and
// cached).
func (t *Table) keyLocked(e *entry, epoch uint32) [32]byte {
	if e.hasKey && e.epoch == epoch {
		return e.key
	}
	e.key, e.epoch, e.hasKey = t.keys.Key(e.id, epoch), epoch, true
	return e.key
}

// handle checks one datagram and records its beat. It returns the answer
// (written into out) and whether to send one.
func (t *Table) handle(b []byte, src netip.AddrPort, sig *signer, out []byte) ([]byte, bool) {
	m, err := parse(b)
	if err != nil {
		t.reject(err)
		return nil, false
	}
	if m.Kind != KindBeat {
		t.stats.Rejected[RejectMalformed].Add(1)
		return nil, false
	}
	now := t.Now()
	nowUS := now.UnixMicro()
	cur := t.keys.Epoch(now)
	ok, rekey := usable(m.Epoch, cur)
	s := t.shard(m.MachineID)
	s.mu.Lock()
	e := s.m[m.MachineID]
	var key [32]byte
	if e != nil {
		key = t.keyLocked(e, m.Epoch)
	} else {
		key = t.keys.Key(m.MachineID, m.Epoch)
	}
	if !sig.verify(b, &key) {
		s.mu.Unlock()
		t.stats.Rejected[RejectBadMAC].Add(1)
		return nil, false
	}
	skew := t.MaxSkew
	if skew <= 0 {
		skew = DefaultMaxSkew
	}
	reply := Message{Kind: KindAck, MachineID: m.MachineID, Seq: m.Seq, TimeUS: nowUS, Epoch: m.Epoch}
	switch {
	case !ok:
		s.mu.Unlock()
		t.stats.Rejected[RejectOldKey].Add(1)
		return nil, false
	case e == nil:
		// Signed by a machine this control plane has not seen since it
		// started (and the store did not list): a full sync introduces it.
		s.mu.Unlock()
		t.stats.Rejected[RejectUnknown].Add(1)
		reply.Kind, reply.Flags = KindSync, FlagUnknown
		sig.seal(&reply, &key, out)
		t.stats.Syncs.Add(1)
		return out, true
	case m.Seq <= e.seq:
		s.mu.Unlock()
		t.stats.Rejected[RejectReplay].Add(1)
		return nil, false
	case m.TimeUS < nowUS-skew.Microseconds() || m.TimeUS > nowUS+skew.Microseconds():
		s.mu.Unlock()
		t.stats.Rejected[RejectSkew].Add(1)
		return nil, false
	}
	e.seq = m.Seq
	e.addr = src
	s.beatLocked(e, nowUS)
	reply.Version = e.version
	switch {
	case e.needSync || m.Version != e.version:
		reply.Kind, reply.Flags = KindSync, FlagDesired
	case rekey:
		reply.Kind, reply.Flags = KindSync, FlagRekey
	}
	s.mu.Unlock()
	t.stats.Beats.Add(1)
	switch {
	case reply.Kind == KindSync:
		t.stats.Syncs.Add(1)
	case m.Flags&FlagAck != 0:
		t.stats.Acks.Add(1)
	default:
		return nil, false // nothing to say, and no answer asked for
	}
	sig.seal(&reply, &key, out)
	return out, true
}

func (t *Table) reject(err error) {
	switch err {
	case errTruncated:
		t.stats.Rejected[RejectTruncated].Add(1)
	default:
		t.stats.Rejected[RejectMalformed].Add(1)
	}
}

package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/suanli/suanli/auth"
	"github.com/suanli/suanli/heartbeat"
)

// simAgent is one simulated agent on the light channel.
type simAgent struct {
	key      [32]byte
	seq      int64
	acked    int64 // µs: when the last beat that asked an answer went out
	version  atomic.Int64
	dead     atomic.Bool
	syncing  atomic.Bool
	lastSent atomic.Int64 // µs
	changeAt atomic.Int64 // ns: a change was asked then, not yet learned
	sent     *sentLog     // sample agents only
}

// sentLog is a sample agent's beats not yet seen in the store.
type sentLog struct {
	mu  sync.Mutex
	fly []int64 // µs, in order
}

// lightSim is N agents beating over UDP from a few sockets.
type lightSim struct {
	c      hbConfig
	p      *serverProc
	epoch  uint32
	agents []*simAgent // by machine id; [0] unused
	conns  []*net.UDPConn
	stop   atomic.Bool
	wg     sync.WaitGroup

	sent, acks, syncs, pokes atomic.Int64

	mu        sync.Mutex
	changeLat []time.Duration
}

func runLight(ctx context.Context, c hbConfig, path string, secret []byte) (measure, error) {
	progress("light channel: starting the server (heartbeat table, batches, lease checker, UDP)")
	p, err := startServer(ctx, "-db", path, "-mode", "light", "-secret", hex.EncodeToString(secret), "-interval", c.interval.String(),
		"-suspect-after", (2*c.interval + time.Second).String(), "-lost-after", time.Minute.String(), "-cpuprofile", c.profile)
	if err != nil {
		return measure{}, err
	}
	defer p.stop()
	keys, err := heartbeat.NewKeys(auth.DeriveKey(secret, "heartbeat key"), 0)
	if err != nil {
		return measure{}, err
	}
	s := &lightSim{c: c, p: p, epoch: keys.Epoch(time.Now()), agents: make([]*simAgent, c.agents+1)}
	seq0 := time.Now().UnixMicro()
	rng := mrand.New(mrand.NewPCG(c.seed, 3))
	for id := 1; id <= c.agents; id++ {
		// Agents joined at different times: their asks for an answer (every
		// 30 s) are spread, as they are in a marketplace.
		a := &simAgent{key: keys.Key(int64(id), s.epoch), seq: seq0, acked: seq0 - rng.Int64N(30e6)}
		a.version.Store(1)
		s.agents[id] = a
	}
	sample := make([]int64, 0, c.sample)
	for i := range c.sample {
		id := int64(2 + i*(c.agents/c.sample))
		s.agents[id].sent = &sentLog{}
		sample = append(sample, id)
	}
	for range c.sockets {
		conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			return measure{}, err
		}
		conn.SetReadBuffer(4 << 20)
		conn.SetWriteBuffer(4 << 20)
		s.conns = append(s.conns, conn)
	}
	cpu0 := cpuTime()
	start := time.Now()
	for i, conn := range s.conns {
		s.wg.Add(2)
		go s.send(i, conn, start)
		go s.receive(conn)
	}
	defer s.halt()
	progress("light channel: %d agents beating, %s of warm-up", c.agents, c.warmup)
	time.Sleep(c.warmup)

	// The measured window, the store followed for the sample agents'
	// beats (from another process: no cost to the server).
	wctx, wstop := context.WithCancel(ctx)
	var side sync.WaitGroup
	var persistLat []time.Duration
	side.Add(1)
	go func() { defer side.Done(); persistLat = s.follow(wctx, path, sample) }()
	progress("light channel: measuring for %s", c.window)
	acks0 := s.acks.Load()
	sent0 := s.sent.Load()
	st0, _ := p.stats()
	drops0 := udpDrops()
	m, err := window(ctx, p, c.window)
	st1, _ := p.stats()
	sent, acked := s.sent.Load()-sent0, s.acks.Load()-acks0
	wstop()
	side.Wait()
	if err != nil {
		return m, err
	}
	batches, rows := st1.Flushes-st0.Flushes, st1.Flushed-st0.Flushed
	drops := udpDrops() - drops0
	fmt.Printf("light channel: %.0f beats/s taken by the server (%.0f sent, %.0f answered per second), server CPU %.1f%% of %d cores = %.2f µs per beat; %d batches written, %.0f machines each\n",
		m.rate, float64(sent)/m.secs, float64(acked)/m.secs, m.cpuPct, runtime.NumCPU(), float64(m.cpuPerBeat)/1e3,
		batches, float64(rows)/float64(max(batches, 1)))
	fmt.Printf("  batches took %.0f ms each on average, %.0f ms at most; %d datagrams rejected; the kernel dropped %d (socket buffers full)\n",
		float64(st1.FlushNS-st0.FlushNS)/1e6/float64(max(batches, 1)), float64(st1.FlushMax)/1e6, st1.Rejected-st0.Rejected, drops)
	fmt.Printf("  (the simulated agents used %.1f%% of the machine's CPU: %.2f µs per beat sent)\n",
		100*(cpuTime()-cpu0).Seconds()/time.Since(start).Seconds()/float64(runtime.NumCPU()), float64(cpuTime()-cpu0)/1e3/float64(max(s.sent.Load(), 1)))
	// Desired-state changes, after the window: each costs the server a
	// database write and a full sync (what a rental costs is more), which
	// is not heartbeat work. The agents keep beating meanwhile.
	progress("light channel: %d desired-state changes", c.changes)
	s.change(ctx)
	time.Sleep(time.Second) // the last ones land
	s.mu.Lock()
	changes := s.changeLat
	s.mu.Unlock()
	fmt.Printf("visible: a beat is in the store (where the lease checker reads it) p50 %s, p99 %s after it was sent (%d beats followed);\n"+
		"  a desired-state change reaches its agent p50 %s, p99 %s after it was asked for (%d changes, by poke)\n",
		percentile(persistLat, 50).Round(time.Millisecond), percentile(persistLat, 99).Round(time.Millisecond), len(persistLat),
		percentile(changes, 50).Round(10*time.Microsecond), percentile(changes, 99).Round(10*time.Microsecond), len(changes))

	// Dead agents: stopped now, timed until the lease checker marks them.
	if m.deadMax, err = s.kill(ctx, path, sample); err != nil {
		return m, err
	}

	// The check round, with every agent stopped.
	s.halt()
	progress("light channel: check round")
	m.checked, err = s.checkRound(path)
	return m, err
}

// halt stops every simulated agent and waits for them.
func (s *lightSim) halt() {
	if s.stop.Swap(true) {
		return
	}
	for _, conn := range s.conns {
		conn.Close() // ends the readers
	}
	s.wg.Wait()
}

// send beats its socket's agents (ids ≡ i+1 mod sockets), each at its own
// phase of the interval, until stop.
func (s *lightSim) send(i int, conn *net.UDPConn, start time.Time) {
	defer s.wg.Done()
	n := len(s.agents) - 1
	server := s.p.udp
	g := heartbeat.NewSigner()
	buf := make([]byte, heartbeat.Size)
	step := s.c.interval / time.Duration(n)
	for k := 0; ; k++ {
		round := start.Add(time.Duration(k) * s.c.interval)
		for id := i + 1; id <= n; id += len(s.conns) {
			if s.stop.Load() {
				return
			}
			if d := time.Until(round.Add(time.Duration(id-1) * step)); d > time.Millisecond {
				time.Sleep(d)
			}
			a := s.agents[id]
			if a.dead.Load() {
				continue
			}
			now := time.Now().UnixMicro()
			a.seq = max(a.seq+1, now)
			m := heartbeat.Message{Kind: heartbeat.KindBeat, MachineID: int64(id), Seq: a.seq, Version: a.version.Load(), TimeUS: now, Epoch: s.epoch}
			if now-a.acked >= 30e6-s.c.interval.Microseconds() { // as agents ask: every 30 s
				m.Flags, a.acked = heartbeat.FlagAck, now
			}
			if _, err := conn.WriteToUDPAddrPort(g.Seal(&m, &a.key, buf), server); err != nil {
				continue
			}
			a.lastSent.Store(now)
			s.sent.Add(1)
			if a.sent != nil {
				a.sent.mu.Lock()
				a.sent.fly = append(a.sent.fly, now)
				a.sent.mu.Unlock()
			}
		}
	}
}

// receive reads answers and pokes; a sync request or a poke is a full sync
// for the agent (its bookkeeping done by the server's /synced).
func (s *lightSim) receive(conn *net.UDPConn) {
	defer s.wg.Done()
	g := heartbeat.NewSigner()
	buf := make([]byte, 512)
	for {
		n, _, err := conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			return
		}
		peek, err := heartbeat.Peek(buf[:n])
		if err != nil || peek.MachineID < 1 || peek.MachineID >= int64(len(s.agents)) {
			continue
		}
		a := s.agents[peek.MachineID]
		m, err := g.Open(buf[:n], &a.key)
		if err != nil {
			continue
		}
		switch m.Kind {
		case heartbeat.KindAck:
			s.acks.Add(1)
			continue
		case heartbeat.KindSync:
			s.acks.Add(1)
			s.syncs.Add(1)
		case heartbeat.KindPoke:
			s.pokes.Add(1)
		}
		if a.dead.Load() {
			continue
		}
		if at := a.changeAt.Swap(0); at != 0 {
			s.mu.Lock()
			s.changeLat = append(s.changeLat, time.Duration(time.Now().UnixNano()-at))
			s.mu.Unlock()
		}
		if a.syncing.CompareAndSwap(false, true) {
			go func(id int64) {
				defer a.syncing.Store(false)
				if v, err := s.p.post("/synced?id=" + strconv.FormatInt(id, 10)); err == nil {
					if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
						a.version.Store(n)
					}
				}
			}(m.MachineID)
		}
	}
}

// change asks for desired-state changes of random agents, 50 a second.
func (s *lightSim) change(ctx context.Context) {
	rng := mrand.New(mrand.NewPCG(s.c.seed, 7))
	every := 20 * time.Millisecond
	t := time.NewTicker(every)
	defer t.Stop()
	for range s.c.changes {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		id := 1 + rng.IntN(len(s.agents)-1)
		a := s.agents[id]
		if a.sent != nil || !a.changeAt.CompareAndSwap(0, time.Now().UnixNano()) {
			continue
		}
		if _, err := s.p.post("/change?id=" + strconv.Itoa(id)); err != nil {
			progress("change of machine %d: %v", id, err)
		}
	}
}

// follow polls the store every 50 ms for the sample agents' persisted
// heartbeats and returns, for each beat seen there, the time from its send
// until the poll that saw it.
func (s *lightSim) follow(ctx context.Context, path string, sample []int64) []time.Duration {
	db, err := openReader(path)
	if err != nil {
		progress("follow the store: %v", err)
		return nil
	}
	defer db.Close()
	in := strings.TrimSuffix(strings.Repeat("?,", len(sample)), ",")
	args := make([]any, len(sample))
	for i, id := range sample {
		args[i] = id
	}
	// Beats sent before the window are not followed.
	now := time.Now().UnixMicro()
	for _, id := range sample {
		l := s.agents[id].sent
		l.mu.Lock()
		l.fly = l.fly[:0]
		l.mu.Unlock()
	}
	var out []time.Duration
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return out
		case <-t.C:
		}
		rows, err := db.Query(`SELECT machine_id, last_heartbeat FROM machine_heartbeats WHERE machine_id IN (`+in+`)`, args...)
		if err != nil {
			progress("follow the store: %v", err)
			return out
		}
		seen := time.Now().UnixMicro()
		for rows.Next() {
			var id, hb int64
			if rows.Scan(&id, &hb) != nil {
				continue
			}
			l := s.agents[id].sent
			l.mu.Lock()
			k := 0
			for k < len(l.fly) && l.fly[k] <= hb {
				if l.fly[k] >= now {
					out = append(out, time.Duration(seen-l.fly[k])*time.Microsecond)
				}
				k++
			}
			l.fly = l.fly[k:]
			l.mu.Unlock()
		}
		rows.Close()
	}
}

// kill stops c.dead agents and waits until the store says each is no
// longer online; it returns the longest time from an agent's last beat to
// that, and checks that no live agent was marked.
func (s *lightSim) kill(ctx context.Context, path string, sample []int64) (time.Duration, error) {
	rng := mrand.New(mrand.NewPCG(s.c.seed, 99))
	skip := map[int64]bool{}
	for _, id := range sample {
		skip[id] = true
	}
	for _, id := range checkIDs(s.c) {
		skip[id] = true
	}
	var dead []int64
	for len(dead) < s.c.dead {
		id := int64(1 + rng.IntN(len(s.agents)-1))
		if !skip[id] {
			skip[id] = true
			dead = append(dead, id)
			s.agents[id].dead.Store(true)
		}
	}
	killed := time.Now()
	time.Sleep(10 * time.Millisecond) // a beat already on its way goes out
	progress("dead agents: %d stopped, waiting for the lease checker", len(dead))
	db, err := openReader(path)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	in := strings.TrimSuffix(strings.Repeat("?,", len(dead)), ",")
	args := make([]any, len(dead))
	for i, id := range dead {
		args[i] = id
	}
	limit := 3*s.c.interval + time.Second
	found := map[int64]time.Duration{}
	var lat []time.Duration
	for len(found) < len(dead) && time.Since(killed) < limit+20*time.Second {
		time.Sleep(50 * time.Millisecond)
		rows, err := db.QueryContext(ctx, `SELECT id FROM machines WHERE status <> 'online' AND id IN (`+in+`)`, args...)
		if err != nil {
			return 0, err
		}
		now := time.Now().UnixMicro()
		for rows.Next() {
			var id int64
			rows.Scan(&id)
			if _, ok := found[id]; !ok {
				d := time.Duration(now-s.agents[id].lastSent.Load()) * time.Microsecond
				found[id] = d
				lat = append(lat, d)
			}
		}
		rows.Close()
	}
	var others int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM machines WHERE status <> 'online'`).Scan(&others); err != nil {
		return 0, err
	}
	others -= len(found)
	maxLat := percentile(lat, 100)
	fmt.Printf("dead agents: %d of %d detected (suspect) p50 %s, max %s after their last beat (goal ≤ %s = 3 × %s + 1s); live agents marked: %d\n",
		len(found), len(dead), percentile(lat, 50).Round(10*time.Millisecond), maxLat.Round(10*time.Millisecond), limit, s.c.interval, others)
	if len(found) < len(dead) {
		return time.Hour, fmt.Errorf("%d dead agents never detected", len(dead)-len(found))
	}
	if others != 0 {
		return maxLat, fmt.Errorf("%d live agents were marked not online", others)
	}
	return maxLat, nil
}

// checkRound beats each check machine once from a socket of its own and
// waits for each answer.
func (s *lightSim) checkRound(path string) ([]int64, error) {
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	g := heartbeat.NewSigner()
	buf, in := make([]byte, heartbeat.Size), make([]byte, 512)
	server := s.p.udp
	send := func(id int64) (int64, error) {
		a := s.agents[id]
		now := time.Now().UnixMicro()
		a.seq = max(a.seq+1, now) + 1e12
		m := heartbeat.Message{Kind: heartbeat.KindBeat, Flags: heartbeat.FlagAck, MachineID: id, Seq: a.seq, Version: a.version.Load(), TimeUS: now, Epoch: s.epoch}
		if _, err := conn.WriteToUDPAddrPort(g.Seal(&m, &a.key, buf), server); err != nil {
			return 0, err
		}
		conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		for {
			n, _, err := conn.ReadFromUDPAddrPort(in)
			if err != nil {
				return 0, err
			}
			r, err := g.Open(in[:n], &a.key)
			if err == nil && r.MachineID == id && r.Seq == a.seq && (r.Kind == heartbeat.KindAck || r.Kind == heartbeat.KindSync) {
				return r.Version, nil
			}
		}
	}
	// Before and after the round, every beat heard is in the store.
	flushed := func() error {
		time.Sleep(100 * time.Millisecond) // answered beats are in the table
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			st, err := s.p.stats()
			if err != nil {
				return err
			}
			if st.Pending == 0 {
				return nil
			}
		}
		return errors.New("check round: the server did not write its beats within a minute")
	}
	return checkRound(path, checkIDs(s.c), flushed, send)
}

// udpDrops reads the kernel's count of UDP datagrams dropped for full
// receive buffers (/proc/net/snmp RcvbufErrors), or 0.
func udpDrops() int64 {
	b, err := os.ReadFile("/proc/net/snmp")
	if err != nil {
		return 0
	}
	var head []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "Udp:" {
			continue
		}
		if head == nil {
			head = f
			continue
		}
		for i, h := range head {
			if h == "RcvbufErrors" && i < len(f) {
				n, _ := strconv.ParseInt(f[i], 10, 64)
				return n
			}
		}
	}
	return 0
}

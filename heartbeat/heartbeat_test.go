package heartbeat_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/suanli/suanli"
	"github.com/suanli/suanli/heartbeat"
)

var t0 = time.Date(2026, 11, 10, 12, 0, 0, 0, time.UTC)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newKeys(tb testing.TB) *heartbeat.Keys {
	tb.Helper()
	k, err := heartbeat.NewKeys([]byte("0123456789abcdef0123456789abcdef"), time.Hour)
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

// rig is a table served on a loopback UDP socket, and a raw socket to send
// crafted datagrams from.
type rig struct {
	clk   *clock
	keys  *heartbeat.Keys
	table *heartbeat.Table
	srv   *heartbeat.Server
	conn  *net.UDPConn
}

func newRig(t *testing.T) *rig {
	t.Helper()
	r := &rig{clk: &clock{t: t0}, keys: newKeys(t)}
	r.table = heartbeat.NewTable(r.keys)
	r.table.Now = r.clk.Now
	srv, err := heartbeat.Listen("127.0.0.1:0", r.table, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.srv = srv
	t.Cleanup(func() { srv.Close() })
	r.conn, err = net.DialUDP("udp", nil, srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.conn.Close() })
	return r
}

// beat builds a beat of machine id signed with signer's key.
func (r *rig) beat(id, signer, seq, version int64) []byte {
	now := r.clk.Now()
	e := r.keys.Epoch(now)
	key := r.keys.Key(signer, e)
	m := heartbeat.Message{Kind: heartbeat.KindBeat, Flags: heartbeat.FlagAck, MachineID: id, Seq: seq, Version: version, TimeUS: now.UnixMicro(), Epoch: e}
	return m.Marshal(&key)
}

// send sends b and returns the answer (pokes skipped), or false when none
// came.
func (r *rig) send(t *testing.T, id int64, b []byte) (heartbeat.Message, bool) {
	t.Helper()
	if _, err := r.conn.Write(b); err != nil {
		t.Fatal(err)
	}
	r.conn.SetReadDeadline(time.Now().Add(150 * time.Millisecond))
	buf := make([]byte, 512)
	for {
		n, err := r.conn.Read(buf)
		if err != nil {
			return heartbeat.Message{}, false
		}
		m, err := heartbeat.Unmarshal(buf[:n], r.keys.Key)
		if err != nil {
			t.Fatalf("answer to machine %d: %v", id, err)
		}
		if m.Kind != heartbeat.KindPoke {
			return m, true
		}
	}
}

func TestBeatsAcceptedAndAnswered(t *testing.T) {
	r := newRig(t)
	r.table.Synced(7, 3, 0)
	m, ok := r.send(t, 7, r.beat(7, 7, 1, 3))
	if !ok || m.Kind != heartbeat.KindAck || m.MachineID != 7 || m.Seq != 1 || m.Version != 3 {
		t.Fatalf("answer to a current beat = %+v (%v), want ack of seq 1 with version 3", m, ok)
	}
	if got, ok := r.table.LastBeat(7); !ok || !got.Equal(t0) {
		t.Errorf("LastBeat(7) = %v, %v; want %v", got, ok, t0)
	}
	// An agent behind the desired state is told to sync.
	m, _ = r.send(t, 7, r.beat(7, 7, 2, 2))
	if m.Kind != heartbeat.KindSync || m.Flags&heartbeat.FlagDesired == 0 {
		t.Errorf("answer to a stale version = %v flags %b, want sync (desired)", m.Kind, m.Flags)
	}
	// A change of the desired state: the next beat is told to sync, until
	// a full sync says the agent has it.
	w := r.table.Wakes(7)
	r.table.Wake(7)
	m, _ = r.send(t, 7, r.beat(7, 7, 3, 3))
	if m.Kind != heartbeat.KindSync {
		t.Errorf("after a wake: %v, want sync", m.Kind)
	}
	r.table.Synced(7, 4, w) // a sync that read the state before the wake
	if m, _ = r.send(t, 7, r.beat(7, 7, 4, 4)); m.Kind != heartbeat.KindSync {
		t.Errorf("after a sync older than the wake: %v, want sync", m.Kind)
	}
	r.table.Synced(7, 4, r.table.Wakes(7))
	if m, _ = r.send(t, 7, r.beat(7, 7, 5, 4)); m.Kind != heartbeat.KindAck || m.Version != 4 {
		t.Errorf("after the sync: %v version %d, want ack version 4", m.Kind, m.Version)
	}
	if n := r.table.Stats().Beats.Load(); n != 5 {
		t.Errorf("beats counted %d, want 5", n)
	}
}

// TestRejected sends what must be dropped: each is counted under its
// reason, nothing is recorded, and nothing (or a sync request) answers.
func TestRejected(t *testing.T) {
	r := newRig(t)
	r.table.Synced(7, 1, 0)
	r.table.Synced(8, 1, 0)
	if _, ok := r.send(t, 7, r.beat(7, 7, 100, 1)); !ok {
		t.Fatal("a good beat was not answered")
	}
	good := r.beat(7, 7, 101, 1)
	badMAC := append([]byte(nil), good...)
	badMAC[heartbeat.Size-1] ^= 1
	tampered := append([]byte(nil), good...)
	tampered[25] ^= 1 // the version
	old := r.beat(7, 7, 200, 1)
	r.clk.Add(time.Minute) // old is now a minute old: past MaxSkew
	cases := []struct {
		name   string
		b      []byte
		reason heartbeat.Reason
	}{
		{"truncated", good[:40], heartbeat.RejectTruncated},
		{"empty", nil, heartbeat.RejectTruncated},
		{"too long", append(append([]byte(nil), good...), 0), heartbeat.RejectMalformed},
		{"bad magic", append([]byte("XXXX"), good[4:]...), heartbeat.RejectMalformed},
		{"bad mac", badMAC, heartbeat.RejectBadMAC},
		{"tampered", tampered, heartbeat.RejectBadMAC},
		{"wrong machine", r.beat(8, 7, 300, 1), heartbeat.RejectBadMAC}, // machine 7's key, machine 8's id
		{"replay", r.beat(7, 7, 100, 1), heartbeat.RejectReplay},
		{"old", old, heartbeat.RejectSkew},
	}
	for _, c := range cases {
		before := r.table.Stats().Rejected[c.reason].Load()
		if m, ok := r.send(t, 7, c.b); ok {
			t.Errorf("%s: answered %v, want no answer", c.name, m.Kind)
		}
		if got := r.table.Stats().Rejected[c.reason].Load(); got != before+1 {
			t.Errorf("%s: rejected[%s] = %d, want %d", c.name, c.reason, got, before+1)
		}
	}
	if got, _ := r.table.LastBeat(8); !got.IsZero() {
		t.Errorf("machine 8 has a beat at %v from a datagram not signed by it", got)
	}
	if got, _ := r.table.LastBeat(7); !got.Equal(t0) {
		t.Errorf("machine 7's last beat = %v, want %v: a rejected datagram moved it", got, t0)
	}
	// A machine this table does not know, signed with its own key: told to
	// do a full sync (which introduces it), not recorded.
	m, ok := r.send(t, 9, r.beat(9, 9, 1, 0))
	if !ok || m.Kind != heartbeat.KindSync || m.Flags&heartbeat.FlagUnknown == 0 {
		t.Errorf("unknown machine: %v flags %b (%v), want sync (unknown)", m.Kind, m.Flags, ok)
	}
	if _, ok := r.table.LastBeat(9); ok || r.table.Stats().Rejected[heartbeat.RejectUnknown].Load() != 1 {
		t.Errorf("unknown machine recorded or not counted")
	}
	// A key from two epochs ago is refused; last epoch's is taken, with a
	// request to fetch the new one.
	r.clk.Add(2 * time.Hour)
	e := r.keys.Epoch(r.clk.Now())
	for _, c := range []struct {
		epoch uint32
		kind  heartbeat.Kind
		ok    bool
	}{{e - 2, 0, false}, {e - 1, heartbeat.KindSync, true}} {
		key := r.keys.Key(7, c.epoch)
		msg := heartbeat.Message{Kind: heartbeat.KindBeat, Flags: heartbeat.FlagAck, MachineID: 7, Seq: int64(1000 + c.epoch), Version: 1, TimeUS: r.clk.Now().UnixMicro(), Epoch: c.epoch}
		m, ok := r.send(t, 7, msg.Marshal(&key))
		if ok != c.ok || m.Kind != c.kind || (ok && m.Flags&heartbeat.FlagRekey == 0) {
			t.Errorf("epoch %d (now %d): answer %v flags %b (%v), want %v", c.epoch, e, m.Kind, m.Flags, ok, c.kind)
		}
	}
	if r.table.Stats().Rejected[heartbeat.RejectOldKey].Load() != 1 {
		t.Errorf("old key not counted")
	}
}

// TestFlushBatches: many beats of many machines reach the store as one
// write of one row per machine (its latest beat); nothing new, no write; a
// failed write is retried by the next flush.
func TestFlushBatches(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: t0}
	table := heartbeat.NewTable(newKeys(t))
	table.Now = clk.Now
	const machines, beats = 500, 10
	for range beats {
		clk.Add(time.Second)
		for id := int64(1); id <= machines; id++ {
			table.Seen(id, clk.Now())
		}
	}
	var writes [][]suanli.MachineBeat
	write := func(_ context.Context, b []suanli.MachineBeat) error {
		writes = append(writes, b)
		return nil
	}
	n, err := table.Flush(ctx, write)
	if err != nil || n != machines || len(writes) != 1 {
		t.Fatalf("Flush = %d, %v with %d writes; want %d rows in 1 write", n, err, len(writes), machines)
	}
	for _, b := range writes[0] {
		if !b.At.Equal(clk.Now()) {
			t.Fatalf("machine %d flushed at %v, want its last beat %v", b.MachineID, b.At, clk.Now())
		}
	}
	if n, _ := table.Flush(ctx, write); n != 0 || len(writes) != 1 {
		t.Errorf("a flush with no new beat wrote %d rows (%d writes)", n, len(writes))
	}
	// Persisted beats (written by a sync itself) are not written again.
	clk.Add(time.Second)
	table.Persisted(1, clk.Now())
	table.Seen(2, clk.Now())
	failed := errors.New("disk full")
	if _, err := table.Flush(ctx, func(context.Context, []suanli.MachineBeat) error { return failed }); err != failed {
		t.Fatalf("Flush with a failing write: %v", err)
	}
	if table.Pending() != 1 {
		t.Errorf("after a failed flush %d pending, want 1", table.Pending())
	}
	n, err = table.Flush(ctx, write)
	if err != nil || n != 1 || writes[1][0].MachineID != 2 || !writes[1][0].At.Equal(clk.Now()) {
		t.Errorf("flush after a failure = %d, %v, %+v; want machine 2 at %v", n, err, writes[len(writes)-1], clk.Now())
	}
	if s := table.Stats(); s.Flushes.Load() != 2 || s.FlushErrs.Load() != 1 || s.Flushed.Load() != machines+1 {
		t.Errorf("stats: %d flushes, %d errors, %d rows", s.Flushes.Load(), s.FlushErrs.Load(), s.Flushed.Load())
	}
}

// TestRefresh: a store's view adds machines, raises versions and asks
// machines that are not online to sync; it never moves a beat back.
func TestRefresh(t *testing.T) {
	table := heartbeat.NewTable(newKeys(t))
	table.Seen(1, t0.Add(time.Minute))
	table.Refresh([]suanli.MachineLease{
		{ID: 1, Status: suanli.MachineOnline, LastHeartbeat: t0, DesiredVersion: 5},
		{ID: 2, Status: suanli.MachineSuspect, LastHeartbeat: t0, DesiredVersion: 1},
	})
	if got, _ := table.LastBeat(1); !got.Equal(t0.Add(time.Minute)) {
		t.Errorf("machine 1's beat went back to %v", got)
	}
	if got, ok := table.LastBeat(2); !ok || !got.Equal(t0) {
		t.Errorf("machine 2 not added from the store: %v %v", got, ok)
	}
	if table.Len() != 2 {
		t.Errorf("Len = %d, want 2", table.Len())
	}
}

func TestClientPokedAndAnswered(t *testing.T) {
	r := newRig(t)
	r.table.Synced(7, 2, 0)
	c, err := heartbeat.Dial(r.srv.Addr().String(), 7)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Send(1, 2, r.clk.Now(), true); !errors.Is(err, heartbeat.ErrNoKey) {
		t.Fatalf("Send without keys: %v", err)
	}
	c.SetKeys(r.keys.Channel(7, "", r.clk.Now()).Keys)
	next := func() heartbeat.Message {
		t.Helper()
		select {
		case m := <-c.Replies():
			return m
		case <-time.After(2 * time.Second):
			t.Fatal("no answer")
		}
		return heartbeat.Message{}
	}
	if err := c.Send(1, 2, r.clk.Now(), true); err != nil {
		t.Fatal(err)
	}
	if m := next(); m.Kind != heartbeat.KindAck || m.Seq != 1 || m.Version != 2 {
		t.Errorf("answer %+v, want ack 1 version 2", m)
	}
	r.table.Wake(7)
	if m := next(); m.Kind != heartbeat.KindPoke {
		t.Errorf("after a wake: %+v, want a poke", m)
	}
	// Keys roll over at the next epoch without a sync.
	r.clk.Add(time.Hour)
	if err := c.Send(2, 2, r.clk.Now(), false); err != nil {
		t.Fatal(err)
	}
	if m := next(); m.Kind != heartbeat.KindSync || m.Epoch != r.keys.Epoch(r.clk.Now()) {
		t.Errorf("beat in the next epoch: %+v, want sync (woken) signed for epoch %d", m, r.keys.Epoch(r.clk.Now()))
	}
	// Nothing to say and no answer asked: recorded, not answered.
	r.table.Synced(7, 2, r.table.Wakes(7))
	r.clk.Add(time.Second)
	if err := c.Send(3, 2, r.clk.Now(), false); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-c.Replies():
		t.Errorf("a beat that asked no answer got %+v", m)
	case <-time.After(200 * time.Millisecond):
	}
	if got, _ := r.table.LastBeat(7); !got.Equal(r.clk.Now()) {
		t.Errorf("unanswered beat not recorded: last beat %v, want %v", got, r.clk.Now())
	}
}

func FuzzUnmarshal(f *testing.F) {
	keys, _ := heartbeat.NewKeys([]byte("0123456789abcdef0123456789abcdef"), time.Hour)
	key := keys.Key(7, 1)
	m := heartbeat.Message{Kind: heartbeat.KindBeat, MachineID: 7, Seq: 1, Version: 2, TimeUS: 3, Epoch: 1}
	f.Add(m.Marshal(&key))
	f.Add([]byte("SLHB"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := heartbeat.Unmarshal(b, keys.Key)
		if err != nil {
			return
		}
		k := keys.Key(m.MachineID, m.Epoch)
		if string(m.Marshal(&k)) != string(b) {
			t.Fatalf("accepted %x but it re-encodes differently", b)
		}
	})
}

// TestCollector: the counters operators scrape are there, by reason.
func TestCollector(t *testing.T) {
	r := newRig(t)
	r.table.Synced(7, 1, 0)
	r.send(t, 7, r.beat(7, 7, 1, 1))
	r.send(t, 7, r.beat(7, 7, 1, 1)) // a replay
	reg := prometheus.NewRegistry()
	reg.MustRegister(r.table.Collector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			for _, l := range m.GetLabel() {
				name += "{" + l.GetValue() + "}"
			}
			got[name] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	for name, want := range map[string]float64{"suanli_heartbeat_beats_total": 1, "suanli_heartbeat_answers_total{ack}": 1,
		"suanli_heartbeat_rejected_total{replay}": 1, "suanli_heartbeat_rejected_total{bad_mac}": 0, "suanli_heartbeat_machines": 1,
		"suanli_heartbeat_pending": 1} {
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", name, v, ok, want)
		}
	}
}

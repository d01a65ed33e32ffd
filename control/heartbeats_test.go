package control_test

import (
	"context"
	"testing"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/control"
	"github.com/suanli/suanli/heartbeat"
)

// rowsChanged returns SQLite's count of rows changed on the store's one
// connection, or false on another database.
func rowsChanged(t *testing.T, f *fixture) (int64, bool) {
	t.Helper()
	if f.svc.Store.Dialect().Name != "sqlite" {
		return 0, false
	}
	var n int64
	if err := f.svc.Store.SQL().QueryRowContext(context.Background(), `SELECT total_changes()`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n, true
}

// TestSyncWithoutChangeIsBatched: syncs that change nothing write nothing;
// the machine's last heartbeat reaches the store with the next flush, one
// row for all of them; reads through the service see it at once; a sync
// that changes something still writes at once.
func TestSyncWithoutChangeIsBatched(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, suanli.Dollars(100), control.Config{})
	in := f.create(t, suanli.InstanceCreate{Guards: suanli.Guards{IdleStopMinutes: -1}})
	f.report(t, suanli.InstanceReport{ID: in.ID, Status: suanli.StatusRunning})
	first := f.clk.Now()
	stored := func() time.Time {
		m, err := f.svc.Store.FindMachineByID(ctx, f.machine)
		if err != nil {
			t.Fatal(err)
		}
		return m.LastHeartbeat
	}
	if got := stored(); !got.Equal(first) {
		t.Fatalf("a sync that started an instance: stored heartbeat %v, want %v (written at once)", got, first)
	}
	changes, sqlite := rowsChanged(t, f)
	for range 50 {
		f.clk.Add(time.Second)
		f.report(t, suanli.InstanceReport{ID: in.ID, Status: suanli.StatusRunning})
	}
	if got := stored(); !got.Equal(first) {
		t.Errorf("after 50 syncs that changed nothing: stored heartbeat %v, want still %v", got, first)
	}
	if n, _ := rowsChanged(t, f); sqlite && n != changes {
		t.Errorf("50 syncs that changed nothing changed %d rows, want 0", n-changes)
	}
	if m, err := f.svc.FindMachineByID(f.host, f.machine); err != nil || !m.LastHeartbeat.Equal(f.clk.Now()) {
		t.Errorf("the service shows last heartbeat %v (%v), want the latest %v", m.LastHeartbeat, err, f.clk.Now())
	}
	before := f.svc.Beats.Stats().Flushes.Load()
	if n, err := f.svc.FlushBeats(ctx); err != nil || n != 1 {
		t.Fatalf("FlushBeats = %d, %v; want 1 machine", n, err)
	}
	if got := f.svc.Beats.Stats().Flushes.Load() - before; got != 1 {
		t.Errorf("%d flushes, want 1", got)
	}
	if n, _ := rowsChanged(t, f); sqlite && n-changes != 1 {
		t.Errorf("the flush changed %d rows, want 1", n-changes)
	}
	if got := stored(); !got.Equal(f.clk.Now()) {
		t.Errorf("after the flush: stored heartbeat %v, want %v", got, f.clk.Now())
	}
	// A report that changes the instance writes the heartbeat with it.
	f.clk.Add(time.Second)
	code := 0
	f.report(t, suanli.InstanceReport{ID: in.ID, Status: suanli.StatusExited, ExitCode: &code})
	if got := stored(); !got.Equal(f.clk.Now()) {
		t.Errorf("a sync with an exit: stored heartbeat %v, want %v (at once)", got, f.clk.Now())
	}
	// A clean shutdown flushes what is left.
	f.clk.Add(time.Second)
	f.report(t)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { f.svc.RunHeartbeats(runCtx); close(done) }()
	cancel()
	<-done
	if got := stored(); !got.Equal(f.clk.Now()) {
		t.Errorf("after shutdown: stored heartbeat %v, want %v", got, f.clk.Now())
	}
}

// TestDeadAgentOnLightBeats: an agent that beats only over the light
// channel (UDP, recorded in memory, persisted in batches) stays online;
// once it stops, the lease check sees it within 3 intervals + 1 s, and its
// instance, lost, is billed up to its last beat — a beat the store only had
// from a batch.
func TestDeadAgentOnLightBeats(t *testing.T) {
	ctx := context.Background()
	const interval = 2 * time.Second
	f := newFixture(t, suanli.Dollars(100), control.Config{HeartbeatInterval: interval, SuspectAfter: 5 * time.Second,
		LostAfter: 20 * time.Second, FailoverGrace: 20 * time.Second})
	srv, err := heartbeat.Listen("127.0.0.1:0", f.svc.Beats, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	f.svc.SetHeartbeatAddr(srv.Addr().String())
	in := f.create(t, suanli.InstanceCreate{Guards: suanli.Guards{IdleStopMinutes: -1}})
	resp, err := f.svc.Sync(f.agent, &suanli.SyncRequest{Instances: []suanli.InstanceReport{{ID: in.ID, Status: suanli.StatusRunning}}})
	if err != nil {
		t.Fatal(err)
	}
	start := f.clk.Now()
	if resp.Heartbeat == nil || resp.Heartbeat.Addr != srv.Addr().String() || len(resp.Heartbeat.Keys) != 2 {
		t.Fatalf("sync response's heartbeat channel = %+v, want %s with two keys", resp.Heartbeat, srv.Addr())
	}
	c, err := heartbeat.Dial(resp.Heartbeat.Addr, f.machine)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetKeys(resp.Heartbeat.Keys)
	seq := int64(0)
	beat := func() {
		t.Helper()
		seq++
		if err := c.Send(seq, resp.Version, f.clk.Now(), true); err != nil {
			t.Fatal(err)
		}
		for {
			select {
			case m := <-c.Replies():
				if m.Kind == heartbeat.KindPoke {
					continue
				}
				if m.Kind != heartbeat.KindAck || m.Seq != seq {
					t.Fatalf("beat %d answered %v seq %d, want an ack", seq, m.Kind, m.Seq)
				}
				return
			case <-time.After(2 * time.Second):
				t.Fatalf("beat %d not answered", seq)
			}
		}
	}
	status := func() string {
		m, err := f.svc.Store.FindMachineByID(ctx, f.machine)
		if err != nil {
			t.Fatal(err)
		}
		return m.Status
	}
	tick := func() {
		t.Helper()
		f.clk.Add(time.Second)
		if err := f.svc.CheckLeases(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := f.svc.Store.Settle(ctx, f.clk.Now()); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i <= 90; i++ { // 90 s on beats alone, lease checks every second
		if i%2 == 0 {
			beat()
		}
		tick()
		if s := status(); s != suanli.MachineOnline {
			t.Fatalf("after %ds of light beats: machine %s, want online", i, s)
		}
	}
	lastBeat := f.clk.Now()
	beat()
	var detected time.Duration
	for detected == 0 {
		tick()
		if status() != suanli.MachineOnline {
			detected = f.clk.Now().Sub(lastBeat)
		}
		if f.clk.Now().Sub(lastBeat) > time.Minute {
			t.Fatal("a dead agent was not detected in a minute")
		}
	}
	if limit := 3*interval + time.Second; detected > limit {
		t.Errorf("dead agent detected %s after its last beat, want ≤ %s", detected, limit)
	}
	for status() != suanli.MachineOffline {
		tick()
		if f.clk.Now().Sub(lastBeat) > time.Minute {
			t.Fatal("not offline after a minute")
		}
	}
	if got := f.status(t, in.ID); got.Status != suanli.StatusLost {
		t.Fatalf("instance %s, want lost", got.Status)
	}
	if secs, _ := computeSecondsAfter(t, f, in.ID, lastBeat); secs != 0 {
		t.Errorf("compute billed %.1fs after the last beat", secs)
	}
	if secs, _ := computeSecondsAfter(t, f, in.ID, start); secs != lastBeat.Sub(start).Seconds() {
		t.Errorf("compute billed %.1fs, want the %s up to the last beat", secs, lastBeat.Sub(start))
	}
}

package agent_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/agent"
	"github.com/suanli/suanli/agent/process"
)

func TestLeaseDeadline(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		l    agent.Lease
		want time.Duration
	}{
		{agent.Lease{Renewed: at, FenceAfter: 100 * time.Second, LostAfter: 120 * time.Second, Heartbeat: 10 * time.Second}, 110 * time.Second},
		{agent.Lease{Renewed: at, FenceAfter: 5 * time.Second, LostAfter: 10 * time.Second, Heartbeat: 1 * time.Second}, 6 * time.Second},
		// Little room before lost_after: half of it.
		{agent.Lease{Renewed: at, FenceAfter: 9 * time.Second, LostAfter: 10 * time.Second, Heartbeat: 5 * time.Second}, 9500 * time.Millisecond},
		// Nothing announced yet: a second after the agent's own fence.
		{agent.Lease{Renewed: at, FenceAfter: 100 * time.Second}, 101 * time.Second},
	} {
		if got := c.l.Deadline().Sub(at); got != c.want {
			t.Errorf("Deadline of %+v = renewed + %s, want + %s", c.l, got, c.want)
		}
	}
}

// TestWatchdog runs the watchdog over a real process-runtime workload: a
// lease kept fresh stops nothing; once it runs out the workload is stopped
// (and saved as stopped, not exited); removing the lease file ends it.
func TestWatchdog(t *testing.T) {
	dir := t.TempDir()
	r := process.New(dir, nil)
	ctx := t.Context()
	t.Cleanup(func() { r.Remove(context.Background(), 3) })
	if err := r.Ensure(ctx, suanli.InstanceSpec{ID: 3, Desired: suanli.DesiredRunning, Cmd: []string{"sleep", "60"}}); err != nil {
		t.Fatal(err)
	}
	lease := agent.LeasePath(dir)
	renew := func() {
		if err := agent.WriteLease(lease, agent.Lease{AgentPID: os.Getpid(), Renewed: time.Now(), FenceAfter: 300 * time.Millisecond,
			LostAfter: 2 * time.Second, Heartbeat: 100 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
	}
	renew()
	fenced := make(chan time.Time, 10)
	w := &agent.Watchdog{Lease: lease, Poll: 20 * time.Millisecond, Fence: func(ctx context.Context, grace time.Duration) (int, error) {
		n, err := process.Fence(ctx, dir, grace, nil)
		if n > 0 {
			fenced <- time.Now()
		}
		return n, err
	}}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		renew()
	}
	select {
	case <-fenced:
		t.Fatalf("the watchdog fenced while the lease was renewed")
	default:
	}
	last := time.Now()
	var at time.Time
	select {
	case at = <-fenced:
	case <-time.After(5 * time.Second):
		t.Fatalf("no fence 5s after the lease stopped being renewed")
	}
	if d := at.Sub(last); d < 300*time.Millisecond {
		t.Errorf("fenced %s after the last renewal, before the agent's own fence interval", d)
	}
	reps, err := process.New(dir, nil).Status(ctx)
	if err != nil || len(reps) != 1 || reps[0].Status != suanli.StatusStopped {
		t.Errorf("after the fence: %+v (%v), want instance 3 stopped", reps, err)
	}
	if err := os.Remove(lease); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Errorf("the watchdog went on after its lease file was removed")
	}
}

// TestAgentRenewsLease: with Config.LeaseFile the agent writes its lease at
// start and renews it with every answered sync.
func TestAgentRenewsLease(t *testing.T) {
	dir := t.TempDir()
	lease := agent.LeasePath(dir)
	srv := newTestServer(t, 100*time.Millisecond)
	stop := startAgent(t, srv, process.New(dir, nil), func(c *agent.Config) {
		c.LeaseFile, c.FenceAfter = lease, time.Minute
	})
	defer stop()
	var first agent.Lease
	deadline := time.Now().Add(5 * time.Second)
	for {
		l, err := agent.ReadLease(lease)
		if err == nil && first.Renewed.IsZero() {
			first = l
		}
		if err == nil && l.Renewed.After(first.Renewed) {
			// The server announces lost_after 1.2s: the fence in force is
			// capped below it, and the lease says so.
			if l.AgentPID != os.Getpid() || l.FenceAfter <= 0 || l.FenceAfter >= l.LostAfter || l.Heartbeat != 100*time.Millisecond || time.Since(l.Renewed) > 5*time.Second {
				t.Errorf("lease %+v: want this process, the fence in force (below lost_after), the heartbeat, renewed just now", l)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("lease %+v (%v) not renewed within 5s of 100ms heartbeats", l, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

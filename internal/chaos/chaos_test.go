package chaos_test

import (
	"context"
	"testing"
	"time"

	"github.com/suanli/suanli/internal/chaos"
	"github.com/suanli/suanli/internal/testreq"
)

// startCluster starts a cluster for the test, or skips (fails in CI) when
// Docker is missing; the cluster is removed at the end.
func startCluster(t *testing.T, opts chaos.Options) *chaos.Cluster {
	t.Helper()
	if err := chaos.Available(t.Context()); err != nil {
		testreq.Missing(t, "docker", err.Error())
	}
	opts.Logf = t.Logf
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := chaos.Start(ctx, opts)
	if err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs:\n%s", c.Logs(6000))
		}
		if err := c.Close(); err != nil {
			t.Errorf("close cluster: %v", err)
		}
	})
	return c
}

// TestHostFaults runs eight agents in containers against one control plane
// and, at once: kills one host, freezes one, cuts one off past lost_after,
// stops one's agent process alone (SIGSTOP: its watchdog must fence),
// cuts one off past fence_after only, and gives one a link that drops 20% of
// the packets each way (and delays them 100ms where the kernel has netem). It checks DESIGN §4's promises: losses detected
// within lost_after + a lease tick (+1s); no compute billed after the last
// heartbeat, nor while no copy ran; never two copies of a rental at once
// (but for the milliseconds a thawed host runs before its agent fences),
// and none billed twice, after the heals; a managed job relaunched exactly
// once per loss; no false loss under packet loss or a partition shorter
// than lost_after.
func TestHostFaults(t *testing.T) {
	faults := []chaos.Fault{chaos.Kill, chaos.Freeze, chaos.Partition, chaos.StopAgent, chaos.ShortPartition}
	if err := chaos.LinkFaultsAvailable(); err != nil {
		testreq.Missing(t, "iptables", err.Error())
	}
	faults = append(faults, chaos.Loss)
	if err := chaos.NetemSupported(t.Context()); err != nil {
		t.Logf("the lossy link gets no delay: %v", err)
	}
	c := startCluster(t, chaos.Options{Agents: len(faults) + 2})
	ctx := t.Context()
	trials, err := c.Round(ctx, 1, faults, chaos.RoundOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bound := c.Opts.DetectionBound()
	for _, tr := range trials {
		t.Logf("%s on %s: detected %s (%s after the last heartbeat), billed after it %.3fs, billed idle %.2fs, billed twice %.3fs, copies %d (dup %s), relaunches %d, interruptions %d, lost %d, suspect %v, recovery %s, cleanup %s, plain after %s",
			tr.Fault, tr.Agent, tr.Detected, tr.SinceHeartbeat, tr.BilledAfterHeartbeat, tr.BilledIdle, tr.BilledTwice, tr.MaxCopies, tr.Duplicate,
			tr.Relaunches, tr.Interruptions, tr.Lost, tr.Suspect, tr.Recovery, tr.Cleanup, tr.PlainAfter)
		for _, n := range tr.Notes {
			t.Errorf("%s: %s", tr.Fault, n)
		}
		for _, d := range tr.Details {
			t.Logf("%s: %s", tr.Fault, d)
		}
		if tr.BilledAfterHeartbeat != 0 {
			t.Errorf("%s: %.3fs of compute billed after the host's last heartbeat, want 0", tr.Fault, tr.BilledAfterHeartbeat)
		}
		if tr.BilledTwice != 0 {
			t.Errorf("%s: %.3fs of compute billed twice", tr.Fault, tr.BilledTwice)
		}
		if tr.BilledIdle > 0.5 {
			t.Errorf("%s: %.2fs of compute billed while no copy ran, want none (0.5s of slack for the beats)", tr.Fault, tr.BilledIdle)
		}
		// A frozen host thaws all at once: its workloads run until its
		// agent, thawed with them, fences them (milliseconds); no other
		// fault may let two copies run.
		if tr.MaxCopies > 1 && (tr.Fault != chaos.Freeze || tr.Duplicate > 500*time.Millisecond) {
			t.Errorf("%s: %d copies of one rental ran at once, for %s", tr.Fault, tr.MaxCopies, tr.Duplicate)
		}
		if tr.Fault.Lost() {
			if tr.Detected <= 0 || tr.Detected > bound {
				t.Errorf("%s: detected after %s, want within %s", tr.Fault, tr.Detected, bound)
			}
			if tr.Relaunches != 1 {
				t.Errorf("%s: managed job relaunched %d times, want exactly once", tr.Fault, tr.Relaunches)
			}
		} else {
			if tr.Lost != 0 || tr.Relaunches != 0 {
				t.Errorf("%s: %d rentals declared lost, %d relaunches: a false loss", tr.Fault, tr.Lost, tr.Relaunches)
			}
			if tr.Fault == chaos.Loss && tr.Interruptions != 0 {
				t.Errorf("loss: the host's workloads were interrupted %d times (a false fence)", tr.Interruptions)
			}
		}
	}
}

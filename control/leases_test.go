package control_test

import (
	"context"
	"testing"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/control"
)

// computeSeconds sums the seconds of the instance's compute charges that
// fall after t (charges cover [From, To]).
func computeSecondsAfter(t *testing.T, f *fixture, id int64, after time.Time) (float64, suanli.Money) {
	t.Helper()
	sum, err := f.svc.FindCharges(f.renter, suanli.ChargeFilter{InstanceID: &id, Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	var secs float64
	for _, c := range sum.Charges {
		if c.Kind != suanli.MeterCompute || !c.To.After(after) {
			continue
		}
		from := c.From
		if from.Before(after) {
			from = after
		}
		secs += c.To.Sub(from).Seconds()
	}
	return secs, sum.ByKind[suanli.MeterCompute]
}

// TestLostHostBilledToLastHeartbeat runs the control plane's loops as Run
// does (settle often, check leases) while a host goes silent: compute billing
// must end at its last heartbeat, though settlements ran after it, and
// resume only when the healed host reports the instance running again.
func TestLostHostBilledToLastHeartbeat(t *testing.T) {
	f := newFixture(t, suanli.Dollars(100), control.Config{HeartbeatInterval: 10 * time.Second, LostAfter: 2 * time.Minute, FailoverGrace: 2 * time.Minute})
	ctx := context.Background()
	in := f.create(t, suanli.InstanceCreate{Guards: suanli.Guards{IdleStopMinutes: -1}})
	f.report(t, suanli.InstanceReport{ID: in.ID, Status: suanli.StatusRunning})
	for i := 0; i < 6; i++ { // a minute of heartbeats, settled as Run does
		f.clk.Add(10 * time.Second)
		f.report(t, suanli.InstanceReport{ID: in.ID, Status: suanli.StatusRunning})
		if _, err := f.svc.Store.Settle(ctx, f.clk.Now()); err != nil {
			t.Fatal(err)
		}
	}
	lastBeat := f.clk.Now()
	for i := 0; i < 15; i++ { // silence: settlements and lease checks go on
		f.clk.Add(10 * time.Second)
		if _, err := f.svc.Store.Settle(ctx, f.clk.Now()); err != nil {
			t.Fatal(err)
		}
		if err := f.svc.CheckLeases(ctx); err != nil {
			t.Fatal(err)
		}
	}
	got := f.status(t, in.ID)
	if got.Status != suanli.StatusLost {
		t.Fatalf("after 150s of silence: %s, want lost", got.Status)
	}
	if secs, _ := computeSecondsAfter(t, f, in.ID, lastBeat); secs != 0 {
		t.Errorf("compute billed for %.1fs after the last heartbeat, want 0", secs)
	}
	if _, c := computeSecondsAfter(t, f, in.ID, time.Time{}); c != suanli.Money(1_000_000/60) {
		t.Errorf("compute billed %s in all, want one minute at $1/h", c)
	}

	// The host heals: its fenced copy is stopped, then the control plane
	// starts it again; billing resumes when it runs.
	f.clk.Add(10 * time.Second)
	f.report(t, suanli.InstanceReport{ID: in.ID, Status: suanli.StatusStopped})
	// Stopped, and (the desired state being running) queued to start again.
	if got := f.status(t, in.ID); (got.Status != suanli.StatusStopped && got.Status != suanli.StatusPending) || got.Desired != suanli.DesiredRunning {
		t.Fatalf("healed host reports stopped: %s/%s, want stopped or pending, desired running", got.Status, got.Desired)
	}
	f.clk.Add(10 * time.Second)
	resumed := f.clk.Now()
	f.report(t, suanli.InstanceReport{ID: in.ID, Status: suanli.StatusRunning})
	f.clk.Add(10 * time.Second)
	f.report(t, suanli.InstanceReport{ID: in.ID, Status: suanli.StatusRunning})
	if _, err := f.svc.Store.Settle(ctx, f.clk.Now()); err != nil {
		t.Fatal(err)
	}
	if secs, _ := computeSecondsAfter(t, f, in.ID, lastBeat); secs != f.clk.Now().Sub(resumed).Seconds() {
		t.Errorf("after the heal: %.1fs billed since the last heartbeat, want the %s since it runs again", secs, f.clk.Now().Sub(resumed))
	}
}

// TestFencedWorkloadBilledToItsEnd: a host cut off for less than lost_after
// fences its workload; when it reports the stop after the heal, billing ends
// where the workload ended (the report's EndedAt), not at the report.
func TestFencedWorkloadBilledToItsEnd(t *testing.T) {
	f := newFixture(t, suanli.Dollars(100), control.Config{HeartbeatInterval: time.Second, LostAfter: 10 * time.Second, FailoverGrace: 10 * time.Second})
	ctx := context.Background()
	in := f.create(t, suanli.InstanceCreate{Guards: suanli.Guards{IdleStopMinutes: -1}})
	f.report(t, suanli.InstanceReport{ID: in.ID, Status: suanli.StatusRunning})
	start := f.clk.Now()
	for i := 0; i < 10; i++ {
		f.clk.Add(time.Second)
		f.report(t, suanli.InstanceReport{ID: in.ID, Status: suanli.StatusRunning})
	}
	// Cut off: the agent fences 4s after its last sync; it comes back at 7s.
	for i := 0; i < 7; i++ {
		f.clk.Add(time.Second)
		if _, err := f.svc.Store.Settle(ctx, f.clk.Now()); err != nil {
			t.Fatal(err)
		}
		if err := f.svc.CheckLeases(ctx); err != nil {
			t.Fatal(err)
		}
	}
	fenced := f.clk.Now().Add(-3 * time.Second)
	f.report(t, suanli.InstanceReport{ID: in.ID, Status: suanli.StatusStopped, EndedAt: &fenced})
	if got := f.status(t, in.ID); got.Status != suanli.StatusStopped && got.Status != suanli.StatusPending {
		t.Fatalf("after the heal: %s, want stopped (or pending, to start again)", got.Status)
	}
	if _, err := f.svc.Store.Settle(ctx, f.clk.Now()); err != nil {
		t.Fatal(err)
	}
	if secs, _ := computeSecondsAfter(t, f, in.ID, start); secs != 14 {
		t.Errorf("billed %.3fs: want the 14s it ran (10s of heartbeats and 4s until the fence), not the 3s it was fenced", secs)
	}
	// An EndedAt from before the previous heartbeat (a clock gone wrong)
	// takes effect no earlier than that heartbeat; one in the future, now.
	f.report(t, suanli.InstanceReport{ID: in.ID, Status: suanli.StatusRunning})
	f.clk.Add(time.Second)
	f.report(t, suanli.InstanceReport{ID: in.ID, Status: suanli.StatusRunning})
	f.clk.Add(time.Second)
	long := f.clk.Now().Add(-time.Hour)
	f.report(t, suanli.InstanceReport{ID: in.ID, Status: suanli.StatusExited, EndedAt: &long})
	if secs, _ := computeSecondsAfter(t, f, in.ID, start); secs != 15 {
		t.Errorf("billed %.3fs, want 15: an EndedAt before the last heartbeat ends billing at that heartbeat", secs)
	}
}

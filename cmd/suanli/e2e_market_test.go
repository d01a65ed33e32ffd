package main_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/suanli/suanli"
)

// TestPreemptionEndToEnd runs the market through the real binary with the
// process runtime: a low bid runs; an on-demand rental takes its GPUs; the
// low bid's workload logs the SIGTERM, shows preempted, and resumes by
// itself after the on-demand rental is destroyed; no compute is charged
// while it is preempted.
func TestPreemptionEndToEnd(t *testing.T) {
	home := t.TempDir()
	m, _ := startUp(t, home)
	if _, err := m.run("host", "list", "1", "--preempt-grace", "5"); err != nil {
		t.Fatal(err)
	}
	script := `echo started; trap 'echo got SIGTERM; exit 0' TERM; while true; do sleep 0.1; done`
	out, err := m.run("create", "1", "--image", "busybox", "--gpus", "1", "--bid", "0.25", "--", "sh", "-c", script)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "interruptible, bid 0.25/h") {
		t.Errorf("create says %q, want the rental type and bid", out)
	}
	low := strings.Fields(out)[1]
	waitStatus(t, m, low, suanli.StatusRunning, 20*time.Second)
	time.Sleep(2 * time.Second)

	var od suanli.Instance
	m.mustJSON(&od, "create", "1", "--image", "busybox", "--gpus", "2", "--", "sh", "-c", "sleep 600")
	if od.RentalType != suanli.RentalOnDemand || od.Status != suanli.StatusScheduling {
		t.Fatalf("on-demand create: %s %s (%s), want on-demand, scheduling while the bid stops", od.RentalType, od.Status, od.StatusMessage)
	}
	waitStatus(t, m, low, suanli.StatusPreempted, 20*time.Second)
	waitStatus(t, m, fmt.Sprint(od.ID), suanli.StatusRunning, 20*time.Second)
	waitLog(t, m, low, "got SIGTERM", 1)
	show, err := m.run("show", low)
	if err != nil || !strings.Contains(show, "interruptible, bid 0.25/h") || !strings.Contains(show, "preempted by instance") {
		t.Errorf("show while preempted: %v\n%s", err, show)
	}
	time.Sleep(3 * time.Second) // preempted: no compute accrues

	if _, err := m.run("destroy", fmt.Sprint(od.ID)); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, m, low, suanli.StatusRunning, 20*time.Second)
	waitLog(t, m, low, "started", 2) // the workload started again, on its disk
	time.Sleep(2 * time.Second)
	if _, err := m.run("stop", low); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, m, low, suanli.StatusStopped, 20*time.Second)
	time.Sleep(1500 * time.Millisecond) // a settlement passes

	var id int64
	fmt.Sscan(low, &id)
	var preemptedAt, resumedAt time.Time
	for _, e := range showEvents(t, m, id) {
		switch {
		case e.Status == suanli.StatusPreempted && preemptedAt.IsZero():
			preemptedAt = e.At
		case e.Status == suanli.StatusRunning && !preemptedAt.IsZero() && resumedAt.IsZero():
			resumedAt = e.At
		}
	}
	if preemptedAt.IsZero() || resumedAt.IsZero() || resumedAt.Sub(preemptedAt) < 3*time.Second {
		t.Fatalf("preempted %s, resumed %s: want a preempted spell of more than 3s", preemptedAt, resumedAt)
	}
	var charges suanli.ChargeSummary
	m.mustJSON(&charges, "billing", "charges", "--instance", low)
	before, after := 0, 0
	for _, c := range charges.Charges {
		if c.Kind != suanli.MeterCompute {
			continue
		}
		switch {
		case !c.To.After(preemptedAt):
			before++
		case !c.From.Before(resumedAt):
			after++
		default:
			t.Errorf("compute charge %s for %s–%s overlaps the preempted spell %s–%s", c.Amount, c.From, c.To, preemptedAt, resumedAt)
		}
	}
	if before == 0 || after == 0 {
		t.Errorf("compute charges: %d before the preemption, %d after the resume; want some of each", before, after)
	}
	prices, err := m.run("market", "prices", "gpu_name=RTX_4090", "--since", "1h")
	if err != nil || !strings.Contains(prices, "winning bids") || !strings.Contains(prices, "median $0.25") {
		t.Errorf("market prices: %v\n%s", err, prices)
	}
	m.stop()
}

func waitLog(t *testing.T, m *marketplace, id, text string, times int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		out, _ := m.run("logs", id)
		if strings.Count(out, text) >= times {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("logs of %s = %q, want %q %d times", id, out, text, times)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

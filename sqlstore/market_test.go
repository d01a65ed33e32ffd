package sqlstore_test

import (
	"testing"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/sqlstore"
)

// TestChangeRateSettlesAtTheOldRate: a rate change settles the compute
// meter at the old rate up to the change, then the new rate applies.
func TestChangeRateSettlesAtTheOldRate(t *testing.T) {
	EachBackend(t, testChangeRateSettlesAtTheOldRate)
}

func testChangeRateSettlesAtTheOldRate(t *testing.T, b Backend) {
	db := b.MustOpen(t)
	ctx := t.Context()
	host := MustAccount(t, db, "host", 0)
	renter := MustAccount(t, db, "renter", suanli.Dollars(10))
	m := MustMachine(t, db, host.ID, 1)
	in, err := db.ApplyPlan(ctx, plan(renter, m, []int{0}), t0)
	if err != nil {
		t.Fatal(err)
	}
	setStatus(t, db, in.ID, suanli.StatusRunning, t0)
	at := t0.Add(30 * time.Minute)
	out, err := db.ChangeRate(ctx, in.ID, at, at, func(i *suanli.Instance) error {
		i.Bid, i.Rates.ComputePerHour = suanli.Dollars(1), suanli.Dollars(1)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if out.Rates.ComputePerHour != suanli.Dollars(1) || out.Version != in.Version+2 {
		t.Errorf("ChangeRate = rate %s version %d", out.Rates.ComputePerHour, out.Version)
	}
	// Compute is settled up to the host's last heartbeat.
	if err := db.RecordHeartbeat(ctx, m.ID, sqlstore.Heartbeat{At: t0.Add(time.Hour), Status: suanli.MachineOnline}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Settle(ctx, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	sum, err := db.FindCharges(ctx, suanli.ChargeFilter{InstanceID: &in.ID})
	if err != nil {
		t.Fatal(err)
	}
	// 30 min at $0.40 + 30 min at $1.00.
	if got := sum.ByKind[suanli.MeterCompute]; got != 700_000 {
		t.Errorf("compute %s, want $0.70", got)
	}
	// The settlement at the change is its own charge, ending at the change.
	var first *suanli.Charge
	for _, c := range sum.Charges {
		if c.Kind == suanli.MeterCompute && (first == nil || c.From.Before(first.From)) {
			first = c
		}
	}
	if first == nil || !first.To.Equal(at) || first.Amount != 200_000 {
		t.Errorf("first compute charge %+v, want $0.20 up to the change", first)
	}
}

// TestApplyPlacementsPreempts: a placement's victims go preempting in the
// same transaction; a victim that changed since the plan makes it stale.
func TestApplyPlacementsPreempts(t *testing.T) { EachBackend(t, testApplyPlacementsPreempts) }

func testApplyPlacementsPreempts(t *testing.T, b Backend) {
	db := b.MustOpen(t)
	ctx := t.Context()
	host := MustAccount(t, db, "host", 0)
	renter := MustAccount(t, db, "renter", suanli.Dollars(10))
	m := MustMachine(t, db, host.ID, 1)
	low := plan(renter, m, []int{0})
	low.Instance.RentalType, low.Instance.Bid, low.Instance.GPUName = suanli.RentalInterruptible, 200_000, "RTX 4090"
	v, err := db.ApplyPlan(ctx, low, t0)
	if err != nil {
		t.Fatal(err)
	}
	v = setStatus(t, db, v.ID, suanli.StatusRunning, t0)

	stale := plan(renter, m, []int{0})
	stale.Preempt = []sqlstore.Victim{{ID: v.ID, Version: v.Version - 1}}
	if _, err := db.ApplyPlan(ctx, stale, t0); suanli.ErrorCode(err) != suanli.ECONFLICT {
		t.Fatalf("stale victim: %v, want conflict", err)
	}
	noVictim := plan(renter, m, []int{0})
	if _, err := db.ApplyPlan(ctx, noVictim, t0); suanli.ErrorCode(err) != suanli.ECONFLICT {
		t.Fatalf("taking an owned GPU without preempting: %v, want conflict", err)
	}
	p := plan(renter, m, []int{0})
	p.Preempt = []sqlstore.Victim{{ID: v.ID, Version: v.Version}}
	in, err := db.ApplyPlan(ctx, p, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if in.Status != suanli.StatusScheduling {
		t.Errorf("new instance %s, want scheduling while its victim stops", in.Status)
	}
	got, err := db.FindInstanceByID(ctx, v.ID, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != suanli.StatusPreempting || got.PreemptedBy != in.ID || got.BurnRate == 0 {
		t.Errorf("victim %s by %d burning %s/h: want preempting, billed through its notice", got.Status, got.PreemptedBy, got.BurnRate)
	}
	rate, err := db.InterruptionRate(ctx, m.ID, t0)
	if err != nil || rate != 1 {
		t.Errorf("InterruptionRate = %v, %v; want 1", rate, err)
	}
	points, _, preempts, err := db.PriceHistory(ctx, []string{"rtx 4090"}, t0, t0.Add(time.Hour))
	if err != nil || len(points) != 1 || points[0].Kind != suanli.PriceBid || points[0].Price != 200_000 || len(preempts) != 1 {
		t.Errorf("history: points %+v preemptions %v (%v)", points, preempts, err)
	}
}

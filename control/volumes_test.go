package control_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/control"
)

// TestVolumeSpendByTag: a volume's storage counts for its tags and project
// as an instance's compute does: in cost reports by tag:KEY and project,
// in a tag budget's spend (what was settled, what accrued since, and its
// burn in the forecast), and a spent tag budget blocks new volumes and
// instances under the tag while others go ahead.
func TestVolumeSpendByTag(t *testing.T) {
	f := newFixture(t, suanli.Dollars(100), control.Config{})
	ctx := context.Background()
	if _, err := f.svc.SetBudget(f.renter, suanli.Budget{Name: "ml", Scope: "tag:team=ml", Amount: 100_000, Action: suanli.BudgetBlock}); err != nil {
		t.Fatal(err)
	}
	// 100 GB at $0.001/GB-hour: $0.10 an hour.
	_, err := f.svc.CreateVolume(f.renter, suanli.VolumeCreate{MachineID: f.machine, Name: "data", SizeGB: 100, Project: "vision",
		Tags: map[string]string{"team": "ml"}})
	if err != nil {
		t.Fatal(err)
	}
	in := f.create(t, suanli.InstanceCreate{Project: "web", Tags: map[string]string{"team": "web"}, Guards: suanli.Guards{IdleStopMinutes: -1}})
	f.report(t, suanli.InstanceReport{ID: in.ID, Status: suanli.StatusRunning})
	f.clk.Add(2 * time.Hour)
	if _, err := f.svc.Store.Settle(ctx, f.clk.Now()); err != nil {
		t.Fatal(err)
	}
	volCost := func() suanli.Money {
		t.Helper()
		vs, err := f.svc.FindVolumes(f.renter, false)
		if err != nil || len(vs) != 1 {
			t.Fatalf("volumes %v (%v), want one", vs, err)
		}
		return vs[0].CostSoFar
	}
	settled := volCost()
	if settled < 190_000 {
		t.Fatalf("volume cost after 2 hours %s, want about $0.20", settled)
	}
	for by, key := range map[string]string{"tag:team": "ml", "project": "vision"} {
		rep, err := f.svc.CostReport(f.renter, by, f.clk.Now().Add(-24*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]suanli.Money{}
		for _, r := range rep.Rows {
			got[r.Key] = r.Amount
		}
		if got[key] != settled || got["(none)"] != 0 || len(rep.Rows) != 2 {
			t.Errorf("cost report by %s: %v, want %s=%s (the volume) and the instance's row, nothing unattributed", by, got, key, settled)
		}
	}

	// Half an hour more, not settled: the budget counts the accrual too.
	f.clk.Add(30 * time.Minute)
	bs, err := f.svc.FindBudgets(f.renter)
	if err != nil || len(bs) != 1 {
		t.Fatalf("budgets %v (%v)", bs, err)
	}
	if want := volCost(); bs[0].Spent != want || want <= settled {
		t.Errorf("budget tag:team=ml spent %s, want the volume's cost so far %s (settled %s)", bs[0].Spent, want, settled)
	}
	if bs[0].Forecast <= bs[0].Spent {
		t.Errorf("budget forecast %s not above spend %s: the volume's burn is missing", bs[0].Forecast, bs[0].Spent)
	}

	// Spent: new rentals under the tag are refused, others are not.
	_, err = f.svc.CreateVolume(f.renter, suanli.VolumeCreate{MachineID: f.machine, Name: "more", SizeGB: 1, Tags: map[string]string{"team": "ml"}})
	if suanli.ErrorCode(err) != suanli.EPAYMENTREQUIRED {
		t.Errorf("volume under a spent tag budget: %v, want payment_required", err)
	}
	_, err = f.svc.CreateInstance(f.renter, suanli.InstanceCreate{OfferID: f.machine, Image: "x", Cmd: []string{"x"}, GPUCount: 1, Tags: map[string]string{"team": "ml"}})
	if suanli.ErrorCode(err) != suanli.EPAYMENTREQUIRED {
		t.Errorf("instance under a spent tag budget: %v, want payment_required", err)
	}
	if _, err := f.svc.CreateVolume(f.renter, suanli.VolumeCreate{MachineID: f.machine, Name: "web", SizeGB: 1, Tags: map[string]string{"team": "web"}}); err != nil {
		t.Errorf("volume outside the spent budget: %v", err)
	}
}

// TestVolumeTagsValidated: a volume's project and tags are checked as an
// instance's.
func TestVolumeTagsValidated(t *testing.T) {
	f := newFixture(t, suanli.Dollars(100), control.Config{})
	for _, c := range []suanli.VolumeCreate{
		{Tags: map[string]string{"a b": "x"}},
		{Tags: map[string]string{"": "x"}},
		{Tags: map[string]string{"k=v": "x"}},
		{Project: "a:b"},
	} {
		c.MachineID, c.Name, c.SizeGB = f.machine, "data", 1
		_, err := f.svc.CreateVolume(f.renter, c)
		var e *suanli.Error
		if !errors.As(err, &e) || e.Code != suanli.EINVALID || (e.Field != "tags" && e.Field != "project") {
			t.Errorf("CreateVolume(project %q, tags %v) = %v, want invalid naming the field", c.Project, c.Tags, err)
		}
	}
}

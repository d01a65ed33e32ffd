package sqlstore_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/suanli/suanli"
)

// TestVolumeCostAttribution: a volume's tags are stored and read back, and
// its charges, both the hour closes' lines and the row posted when it is
// deleted, carry its project and tags, as an instance's carry its own;
// they add up to the volume's cost.
func TestVolumeCostAttribution(t *testing.T) { EachBackend(t, testVolumeCostAttribution) }

func testVolumeCostAttribution(t *testing.T, b Backend) {
	db := b.MustOpen(t)
	ctx := t.Context()
	host := MustAccount(t, db, "host", 0)
	renter := MustAccount(t, db, "renter", suanli.Dollars(100))
	m := MustMachine(t, db, host.ID, 1)
	tags := map[string]string{"team": "ml", "env": "prod"}
	tagged := &suanli.Volume{AccountID: renter.ID, MachineID: m.ID, Name: "data", SizeGB: 50, Rate: 100_000, Project: "vision", Tags: tags}
	plain := &suanli.Volume{AccountID: renter.ID, MachineID: m.ID, Name: "scratch", SizeGB: 20, Rate: 100_000}
	for _, v := range []*suanli.Volume{tagged, plain} {
		if err := db.CreateVolume(ctx, v, host.ID, 0, t0); err != nil {
			t.Fatal(err)
		}
	}
	vs, err := db.FindVolumes(ctx, renter.ID, 0, false, t0)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 2 {
		t.Fatalf("FindVolumes = %d volumes, want 2", len(vs))
	}
	if diff := cmp.Diff(tags, vs[0].Tags); diff != "" || vs[0].Project != "vision" {
		t.Errorf("volume %q project %q, tags (-want +got):\n%s", vs[0].Name, vs[0].Project, diff)
	}
	if len(vs[1].Tags) != 0 || vs[1].Project != "" {
		t.Errorf("untagged volume read back with project %q, tags %v", vs[1].Project, vs[1].Tags)
	}

	// Two hours closed, then the tagged volume deleted (its final charge is
	// a ledger row), then another close.
	if _, err := db.Settle(ctx, t0.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.DeleteVolume(ctx, tagged.ID, t0.Add(150*time.Minute)); err != nil {
		t.Fatal(err)
	}
	end := t0.Add(3 * time.Hour)
	if _, err := db.Settle(ctx, end); err != nil {
		t.Fatal(err)
	}
	rows, err := db.ChargeRows(ctx, renter.ID, t0, end.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	sums := map[int64]suanli.Money{}
	n := map[int64]int{}
	for _, r := range rows {
		sums[r.InstanceID] += r.Amount
		n[r.InstanceID]++
		switch r.InstanceID {
		case -tagged.ID:
			if r.Project != "vision" || !cmp.Equal(r.Tags, tags) {
				t.Errorf("charge %d of volume %q (%s, %s to %s): project %q, tags %v; want vision, %v", r.TxnID, tagged.Name, r.Amount,
					r.From.Format(time.TimeOnly), r.To.Format(time.TimeOnly), r.Project, r.Tags, tags)
			}
		case -plain.ID:
			if r.Project != "" || len(r.Tags) != 0 {
				t.Errorf("charge %d of untagged volume: project %q, tags %v", r.TxnID, r.Project, r.Tags)
			}
		default:
			t.Errorf("charge %d of instance %d: want only the volumes' charges", r.TxnID, r.InstanceID)
		}
	}
	if n[-tagged.ID] < 2 {
		t.Errorf("volume %q has %d charge rows, want close lines and its final row", tagged.Name, n[-tagged.ID])
	}
	all, err := db.FindVolumes(ctx, renter.ID, 0, true, end)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range all {
		if v.CostSoFar == 0 || sums[-v.ID] != v.CostSoFar {
			t.Errorf("volume %q: charge rows sum to %s, cost so far %s", v.Name, sums[-v.ID], v.CostSoFar)
		}
	}
}

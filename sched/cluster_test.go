package sched_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/sched"
)

// TestClusterAgreesWithSchedule runs random placements and releases on a
// Cluster and checks each against Schedule over the same hosts: the
// Cluster places exactly when Schedule can, takes free GPUs whenever
// Schedule would, preempts only what the rule allows, and its indexes stay
// consistent (Verify) with no GPU owned twice.
func TestClusterAgreesWithSchedule(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	c := sched.NewCluster(9)
	var hosts []*sched.Host
	models := []string{"H100", "RTX 4090"}
	for i := 0; i < 40; i++ {
		h := mkHost(int64(i+1), []int{1, 2, 4, 8}[rng.IntN(4)], suanli.Money(300_000+50_000*rng.IntN(5)), 100_000)
		h.GPUName = models[i%2]
		if err := c.AddHost(*h); err != nil {
			t.Fatal(err)
		}
		hosts = append(hosts, h)
	}
	live := map[int64]bool{}
	next := int64(1)
	placed, preempted := 0, 0
	for step := 0; step < 3000; step++ {
		if rng.IntN(3) == 0 && len(live) > 0 {
			var ids []int64
			for id := range live {
				ids = append(ids, id)
			}
			slices.Sort(ids) // map order is random; the test is seeded
			id := ids[rng.IntN(len(ids))]
			if _, _, ok := c.Release(id); !ok {
				t.Fatalf("Release(%d) = false", id)
			}
			delete(live, id)
		} else {
			r := sched.Request{GPUCount: 1 + rng.IntN(4), GPUNames: []string{models[rng.IntN(2)]}}
			if rng.IntN(2) == 0 {
				r.RentalType, r.Bid = suanli.RentalInterruptible, suanli.Money(100_000+100_000*rng.IntN(5))*suanli.Money(r.GPUCount)
			}
			// What Schedule says over the cluster's current hosts.
			snap := &sched.Snapshot{}
			for _, h := range hosts {
				ch, _ := c.Host(h.ID)
				cp := *ch
				snap.Hosts = append(snap.Hosts, &cp)
			}
			want := sched.Schedule(snap, r)
			p, rj, ok := c.Place(r, next)
			if ok != (len(want.Placements) == 1) {
				t.Fatalf("step %d: Cluster placed %v (%s), Schedule placed %d (%s)", step, ok, rj.Reason, len(want.Placements), want.Why(3))
			}
			if !ok {
				continue
			}
			if len(p.Preempt) > 0 && len(want.Placements[0].Preempt) == 0 {
				t.Fatalf("step %d: Cluster preempted %v where Schedule found free GPUs", step, victimIDs(p.Preempt))
			}
			for _, v := range p.Preempt {
				if !sched.Outranks(sched.ClassOf(r.RentalType), p.Rates.ComputePerHour, r.GPUCount, sched.ClassBid, v.Bid, v.Units) {
					t.Fatalf("step %d: preempted claim %d (bid %s for %d) that the request does not outrank", step, v.ID, v.Bid, v.Units)
				}
				delete(live, v.ID)
				preempted++
			}
			live[next] = true
			next++
			placed++
		}
		if err := c.Verify(); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
	}
	if placed < 1000 || preempted == 0 {
		t.Errorf("placed %d, preempted %d: the sequence tests too little", placed, preempted)
	}
}

package sched_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/suanli/suanli"
	"github.com/suanli/suanli/sched"
)

// mkHost is a listed, online GPU host with n GPUs at price per GPU-hour and
// min bid per GPU-hour, holding claims.
func mkHost(id int64, n int, price, minBid suanli.Money, claims ...sched.Claim) *sched.Host {
	h := &sched.Host{ID: id, OwnerID: 100, GPUName: "RTX 4090", GPUMemMB: 24 << 10, CPUCores: 4 * n, RAMMB: int64(n) * 32 << 10,
		DiskFreeGB: 500, Status: suanli.MachineOnline, Region: "eu", Country: "DE",
		Listing: suanli.Listing{Listed: true, PriceGPU: price, MinBid: minBid, PriceDisk: 73_000}}
	for i := 0; i < n; i++ {
		h.GPUIndex = append(h.GPUIndex, i)
		h.GPUUUID = append(h.GPUUUID, "GPU-"+string(rune('a'+i)))
	}
	h.Claims = claims
	return h
}

// owner is a claim holding GPU positions.
func owner(id int64, class sched.Class, bid suanli.Money, pos ...int) sched.Claim {
	var s sched.GPUSet
	for _, p := range pos {
		s |= 1 << uint(p)
	}
	return sched.Claim{ID: id, Class: class, Bid: bid, Units: len(pos), State: sched.Owner, GPUs: s, Order: id, Version: 1}
}

func waiting(id int64, class sched.Class, bid suanli.Money, units int, order int64) sched.Claim {
	return sched.Claim{ID: id, Class: class, Bid: bid, Units: units, State: sched.Waiting, Order: order, Version: 1}
}

func victimIDs(vs []sched.Victim) []int64 {
	var out []int64
	for _, v := range vs {
		out = append(out, v.ID)
	}
	return out
}

const (
	firm = sched.ClassFirm
	bid  = sched.ClassBid
)

func TestScheduleRanking(t *testing.T) {
	// Host 1: four GPUs held by bids $0.30, $0.50, an on-demand rental and $0.20.
	busy := mkHost(1, 4, 400_000, 100_000, owner(11, bid, 300_000, 0), owner(12, bid, 500_000, 1), owner(13, firm, 0, 2), owner(14, bid, 200_000, 3))
	for _, tc := range []struct {
		name    string
		req     sched.Request
		hosts   []*sched.Host
		host    int64
		gpus    []int
		victims []int64
		reject  string // a substring of the only rejection, when nothing is placed
	}{
		{"free GPUs before preemption, even when pricier", sched.Request{GPUCount: 1},
			[]*sched.Host{busy, mkHost(2, 2, 900_000, 0)}, 2, []int{0}, nil, ""},
		{"on-demand preempts the lowest bid", sched.Request{GPUCount: 1},
			[]*sched.Host{busy}, 1, []int{3}, []int64{14}, ""},
		{"on-demand takes two: the two lowest bids", sched.Request{GPUCount: 2},
			[]*sched.Host{busy}, 1, []int{0, 3}, []int64{14, 11}, ""},
		{"on-demand never preempts on-demand", sched.Request{GPUCount: 4},
			[]*sched.Host{busy}, 0, nil, nil, "offer 1 has 0 free GPUs, you asked for 4: 1 of its 4 are held by on-demand or reserved rentals"},
		{"a bid preempts only lower bids per GPU", sched.Request{GPUCount: 2, RentalType: suanli.RentalInterruptible, Bid: 800_000},
			[]*sched.Host{busy}, 1, []int{0, 3}, []int64{14, 11}, ""},
		{"an equal bid does not preempt", sched.Request{GPUCount: 1, RentalType: suanli.RentalInterruptible, Bid: 200_000},
			[]*sched.Host{mkHost(1, 1, 400_000, 100_000, owner(14, bid, 200_000, 0))}, 0, nil, nil, "held by on-demand rentals or bids at or above yours"},
		{"bids compare per GPU", sched.Request{GPUCount: 1, RentalType: suanli.RentalInterruptible, Bid: 450_000},
			// 11 bids $0.80 for 2 GPUs = $0.40/GPU: $0.45 for one GPU outranks it.
			[]*sched.Host{mkHost(1, 2, 400_000, 100_000, owner(11, bid, 800_000, 0, 1))}, 1, []int{0}, []int64{11}, ""},
		{"cheapest host among those with free GPUs", sched.Request{GPUCount: 1},
			[]*sched.Host{mkHost(2, 2, 900_000, 0), mkHost(3, 2, 500_000, 0), mkHost(4, 2, 700_000, 0)}, 3, []int{0}, nil, ""},
		{"tightest fit at equal price", sched.Request{GPUCount: 1},
			[]*sched.Host{mkHost(2, 4, 500_000, 0), mkHost(3, 2, 500_000, 0, owner(31, firm, 0, 0))}, 3, []int{1}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := sched.Schedule(&sched.Snapshot{Hosts: tc.hosts}, tc.req)
			if tc.reject != "" {
				if len(res.Placements) != 0 || len(res.Rejections) != 1 || !strings.Contains(res.Rejections[0].Reason, tc.reject) {
					t.Fatalf("Schedule = %+v, want no placement and a rejection containing %q", res, tc.reject)
				}
				return
			}
			if len(res.Placements) != 1 {
				t.Fatalf("Schedule placed %d (rejections %+v), want 1", len(res.Placements), res.Rejections)
			}
			p := res.Placements[0]
			if p.HostID != tc.host || !slices.Equal(p.GPUIndexes, tc.gpus) || !slices.Equal(victimIDs(p.Preempt), tc.victims) {
				t.Errorf("placed on host %d GPUs %v preempting %v, want host %d GPUs %v preempting %v",
					p.HostID, p.GPUIndexes, victimIDs(p.Preempt), tc.host, tc.gpus, tc.victims)
			}
		})
	}
	// The snapshot is never changed.
	if busy.Claims[0].State != sched.Owner || len(busy.Claims) != 4 {
		t.Errorf("Schedule changed its snapshot: %+v", busy.Claims)
	}
}

func TestScheduleRejectionsNameEveryHost(t *testing.T) {
	cpu := &sched.Host{ID: 5, CPUCores: 8, RAMMB: 16 << 10, Status: suanli.MachineOnline, Listing: suanli.Listing{Listed: true, PriceCPU: 20_000}}
	unlisted := mkHost(6, 2, 400_000, 0)
	unlisted.Listing.Listed = false
	offline := mkHost(7, 2, 400_000, 0)
	offline.Status = suanli.MachineOffline
	other := mkHost(8, 2, 400_000, 0)
	other.GPUName = "RTX 3090"
	us := mkHost(9, 2, 400_000, 0)
	us.Region, us.Country = "us-east", "US"
	pricey := mkHost(10, 2, 900_000, 0)
	small := mkHost(11, 1, 400_000, 0)
	sim := mkHost(12, 2, 400_000, 0)
	sim.Simulated = true
	lowbid := mkHost(13, 2, 400_000, 300_000)
	res := sched.Schedule(&sched.Snapshot{Hosts: []*sched.Host{cpu, unlisted, offline, other, us, pricey, small, sim, lowbid}},
		sched.Request{GPUCount: 2, GPUNames: []string{"RTX_4090"}, Regions: []string{"eu"}, MaxPrice: 1_000_000, AccountID: 1})
	want := map[int64]string{
		5:  "offer 5 is CPU-only, you asked for GPUs",
		6:  "offer 6 is not listed",
		7:  "offer 7: its host is offline (it missed heartbeats)",
		8:  "offer 8 has RTX 3090, you asked for RTX_4090",
		9:  `offer 9 is in region "us-east", you asked for eu`,
		10: "offer 10 costs $1.80/h for 2 GPUs, above your maximum of $1.00/h",
		11: "offer 11 has 1 GPUs in all, you asked for 2",
		12: "offer 12 has simulated GPUs: only its owner may rent it on this marketplace",
	}
	got := map[int64]string{}
	for _, rj := range res.Rejections {
		got[rj.HostID] = rj.Reason
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rejections (-want +got):\n%s", diff)
	}
	if len(res.Placements) != 1 || res.Placements[0].HostID != 13 {
		t.Fatalf("placements %+v, want host 13", res.Placements)
	}
	// The same request as a bid below host 13's minimum names the field.
	res = sched.Schedule(&sched.Snapshot{Hosts: []*sched.Host{lowbid}}, sched.Request{GPUCount: 2, RentalType: suanli.RentalInterruptible, Bid: 500_000})
	if len(res.Rejections) != 1 || res.Rejections[0].Field != "bid" || res.Rejections[0].Reason != "$0.50/h is below offer 13's minimum bid of $0.60/h for 2 GPUs" {
		t.Errorf("low bid: %+v", res.Rejections)
	}
}

func TestScheduleFleet(t *testing.T) {
	hosts := []*sched.Host{mkHost(1, 4, 400_000, 0), mkHost(2, 4, 500_000, 0, owner(21, firm, 0, 0, 1))}
	res := sched.Schedule(&sched.Snapshot{Hosts: hosts}, sched.Request{GPUCount: 2, Count: 4})
	if len(res.Placements) != 3 || res.Complete() {
		t.Fatalf("placed %d of %d, want 3 of 4", len(res.Placements), res.Wanted)
	}
	seen := map[[2]int64]bool{}
	for _, p := range res.Placements {
		for _, g := range p.GPUIndexes {
			k := [2]int64{p.HostID, int64(g)}
			if seen[k] {
				t.Fatalf("GPU %v given twice in %+v", k, res.Placements)
			}
			seen[k] = true
		}
	}
	if why := res.Why(0); !strings.Contains(why, "offer 1 has 0 free GPUs") || !strings.Contains(why, "offer 2 has 0 free GPUs") {
		t.Errorf("Why = %q, want both hosts full", why)
	}
	res = sched.Schedule(&sched.Snapshot{Hosts: hosts}, sched.Request{GPUCount: 2, Count: 4, AllOrNothing: true})
	if len(res.Placements) != 0 || res.Dropped != 3 {
		t.Errorf("all-or-nothing: placed %d, dropped %d; want 0 and 3", len(res.Placements), res.Dropped)
	}
	// A fleet of bids does not preempt its own members.
	res = sched.Schedule(&sched.Snapshot{Hosts: hosts[:1]}, sched.Request{GPUCount: 1, Count: 5, RentalType: suanli.RentalInterruptible, Bid: 100_000})
	if len(res.Placements) != 4 {
		t.Errorf("bid fleet placed %d, want 4", len(res.Placements))
	}
	for _, p := range res.Placements {
		if len(p.Preempt) != 0 {
			t.Errorf("a fleet member preempted %v", victimIDs(p.Preempt))
		}
	}
}

func TestScheduleDrainingGPUsLast(t *testing.T) {
	// GPU 0 is being drained (its owner was preempted and stops within its
	// grace); a newcomer takes the free GPU 1 first.
	h := mkHost(1, 2, 400_000, 0, sched.Claim{ID: 5, Class: bid, Bid: 1, Units: 1, State: sched.Draining, GPUs: 1})
	res := sched.Schedule(&sched.Snapshot{Hosts: []*sched.Host{h}}, sched.Request{GPUCount: 1})
	if len(res.Placements) != 1 || !slices.Equal(res.Placements[0].GPUIndexes, []int{1}) {
		t.Errorf("placement %+v, want GPU 1 (free) before GPU 0 (draining)", res.Placements)
	}
}

func TestArbitrate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		host    *sched.Host
		preempt []int64
		resume  map[int64][]int
	}{
		{"a freed GPU goes to the waiting claim", mkHost(1, 2, 1, 0, owner(1, firm, 0, 0), waiting(2, bid, 300_000, 1, 50)),
			nil, map[int64][]int{2: {1}}},
		{"a higher waiting bid preempts a lower running one", mkHost(1, 1, 1, 0, owner(1, bid, 200_000, 0), waiting(2, bid, 300_000, 1, 50)),
			[]int64{1}, map[int64][]int{2: {0}}},
		{"an equal waiting bid waits", mkHost(1, 1, 1, 0, owner(1, bid, 300_000, 0), waiting(2, bid, 300_000, 1, 50)),
			nil, map[int64][]int{}},
		{"a queued on-demand start preempts bids", mkHost(1, 2, 1, 0, owner(1, bid, 900_000, 0, 1), waiting(2, firm, 0, 1, 50)),
			[]int64{1}, map[int64][]int{2: {0}}},
		{"a queued on-demand start waits for on-demand", mkHost(1, 1, 1, 0, owner(1, firm, 0, 0), waiting(2, firm, 0, 1, 50)),
			nil, map[int64][]int{}},
		{"waiting claims of equal rank go in queue order", mkHost(1, 1, 1, 0, waiting(2, firm, 0, 1, 70), waiting(3, firm, 0, 1, 60)),
			nil, map[int64][]int{3: {0}}},
		{"a big waiting claim that cannot fit lets a smaller one in", mkHost(1, 2, 1, 0, owner(1, firm, 0, 0), waiting(2, bid, 900_000, 2, 1), waiting(3, bid, 100_000, 1, 2)),
			nil, map[int64][]int{3: {1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := sched.Arbitrate(tc.host)
			resume := map[int64][]int{}
			for _, g := range d.Resume {
				resume[g.ID] = tc.host.Indexes(g.GPUs)
			}
			if !slices.Equal(victimIDs(d.Preempt), tc.preempt) || !cmp.Equal(resume, tc.resume) {
				t.Errorf("Arbitrate = preempt %v resume %v, want %v %v", victimIDs(d.Preempt), resume, tc.preempt, tc.resume)
			}
		})
	}
}

func TestOutranks(t *testing.T) {
	if !sched.Outranks(firm, 0, 1, bid, suanli.Dollars(100), 1) {
		t.Error("on-demand must outrank any bid")
	}
	if sched.Outranks(bid, 800_000, 2, bid, 400_000, 1) {
		t.Error("$0.80 for 2 GPUs must not outrank $0.40 for 1 (equal per GPU)")
	}
	if !sched.Outranks(bid, 800_001, 2, bid, 400_000, 1) {
		t.Error("$0.800001 for 2 GPUs must outrank $0.40 for 1")
	}
}

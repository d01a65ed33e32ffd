package control_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/sched"
)

// TestPropertyMarket drives the real control plane (real SQLite store,
// fake clock, fake agents that SIGTERM before stopping and start only on
// GPUs nobody is still stopping on) through random sequences of creates
// (on-demand and bids, single and fleets, by offer and by query), destroys,
// bid changes, stops and (queued) starts, and host listing changes. After
// every second of every sequence: no GPU is owned by two instances and no
// GPU runs two workloads. At the end: every preemption delivered SIGTERM
// before the stop, within the grace; compute was charged only while an
// instance ran (or ran out its notice); every machine is settled (no
// waiting claim outranks an owner it could replace); the ledger balances.
func TestPropertyMarket(t *testing.T) {
	seeds := []uint64{1, 2, 3}
	if testing.Short() {
		seeds = seeds[:1]
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			t.Parallel()
			propertyMarket(t, seed)
		})
	}
}

func propertyMarket(t *testing.T, seed uint64) {
	mk := newMarket(t)
	rng := rand.New(rand.NewPCG(seed, 5))
	grace := map[int64]time.Duration{}
	var machines []int64
	for i, n := range []int{2, 4} {
		g := 3 + 2*i
		id := mk.machine(n, suanli.Money(400_000+100_000*i), 100_000, g)
		machines = append(machines, id)
		grace[id] = time.Duration(g) * time.Second
	}
	var ids []int64
	bid := func() suanli.Money { return suanli.Money(100_000 + 50_000*rng.IntN(10)) }
	for step := 0; step < 70; step++ {
		switch op := rng.IntN(20); {
		case op < 8:
			c := suanli.InstanceCreate{Image: "img", Cmd: []string{"train"}, GPUCount: 1 + rng.IntN(2)}
			if rng.IntN(3) > 0 {
				b := bid() * suanli.Money(c.GPUCount)
				c.Bid = &b
			}
			fc := suanli.FleetCreate{InstanceCreate: c, Count: 1 + rng.IntN(2)}
			if rng.IntN(4) == 0 {
				fc.Query = "gpu_name=RTX_4090"
			} else {
				fc.OfferID = machines[rng.IntN(len(machines))]
			}
			res, err := mk.svc.CreateFleet(mk.renter, fc)
			switch suanli.ErrorCode(err) {
			case "":
				for _, in := range res.Instances {
					ids = append(ids, in.ID)
				}
			case suanli.ECONFLICT, suanli.EINVALID, suanli.ENOTFOUND:
			default:
				t.Fatalf("seed %d step %d: create: %v", seed, step, err)
			}
		case op < 11 && len(ids) > 0:
			id := ids[rng.IntN(len(ids))]
			if _, err := mk.svc.DestroyInstance(mk.renter, id); err != nil {
				t.Fatalf("destroy %d: %v", id, err)
			}
		case op < 14 && len(ids) > 0:
			id := ids[rng.IntN(len(ids))]
			in := mk.get(id)
			b := bid() * suanli.Money(max(in.GPUCount, 1))
			if _, err := mk.svc.ChangeBid(mk.renter, id, b); err != nil && suanli.ErrorCode(err) != suanli.ECONFLICT && suanli.ErrorCode(err) != suanli.EINVALID {
				t.Fatalf("bid %d: %v", id, err)
			}
		case op < 16 && len(ids) > 0:
			id := ids[rng.IntN(len(ids))]
			in := mk.get(id)
			var err error
			if in.Status == suanli.StatusStopped || in.Status == suanli.StatusPreempted || in.Status == suanli.StatusExited {
				_, err = mk.svc.StartInstanceWith(mk.renter, id, suanli.StartOptions{Wait: rng.IntN(2) == 0})
			} else {
				_, err = mk.svc.StopInstance(mk.renter, id)
			}
			if err != nil && suanli.ErrorCode(err) != suanli.ECONFLICT {
				t.Fatalf("stop/start %d: %v", id, err)
			}
		case op < 17:
			m := machines[rng.IntN(len(machines))]
			minBid := suanli.Money(100_000 * (1 + rng.IntN(3)))
			if _, err := mk.svc.ListMachine(mk.host, m, suanli.ListingUpdate{MinBid: &minBid}); err != nil {
				t.Fatal(err)
			}
		case op < 18:
			m := machines[rng.IntN(len(machines))]
			if _, err := mk.svc.UnlistMachine(mk.host, m); err != nil {
				t.Fatal(err)
			}
			mk.advance(time.Second)
			p := suanli.Money(400_000)
			if _, err := mk.svc.ListMachine(mk.host, m, suanli.ListingUpdate{PriceGPU: &p}); err != nil {
				t.Fatal(err)
			}
		default:
			mk.advance(time.Duration(1+rng.IntN(3)) * time.Second)
		}
		mk.advance(time.Second)
	}
	mk.advance(10 * time.Second)
	ctx := context.Background()
	if _, err := mk.db.Settle(ctx, mk.now); err != nil {
		t.Fatal(err)
	}
	mk.checkPreemptions(func(m int64) time.Duration { return grace[m] })
	for _, id := range ids {
		mk.computeOnlyWhileRunning(id)
	}
	ms, live, err := mk.db.Snapshot(ctx, machines)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		h := sched.HostFromMachine(m, live, false, nil)
		if d := sched.Arbitrate(h); !d.Empty() {
			t.Errorf("seed %d: machine %d not settled: %+v", seed, m.ID, d)
		}
	}
	chk, err := mk.db.CheckLedger(ctx)
	if err != nil || chk.PostingSum != 0 || len(chk.Mismatched) > 0 || len(chk.UnbalancedTxn) > 0 {
		t.Errorf("seed %d: ledger %+v %v", seed, chk, err)
	}
	var preemptions int
	if err := mk.db.SQL().QueryRowContext(ctx, `SELECT COUNT(*) FROM preemptions`).Scan(&preemptions); err != nil {
		t.Fatal(err)
	}
	if preemptions == 0 {
		t.Errorf("seed %d: no preemption happened: the sequence tests too little", seed)
	}
	t.Logf("seed %d: %d instances, %d preemptions", seed, len(ids), preemptions)
}

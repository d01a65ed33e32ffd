package control_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/control"
)

// TestIndexMatchesRebuild drives the service through random listings,
// price changes, rentals, stops, starts, destroys, heartbeats and host
// losses, and after every step compares its live offer index (updated
// incrementally) with the index of a fresh service rebuilt from the same
// store: every offer must read the same.
func TestIndexMatchesRebuild(t *testing.T) {
	f := newFixture(t, suanli.Dollars(1000), control.Config{LostAfter: 2 * time.Minute, FailoverGrace: time.Minute})
	ctx := context.Background()
	b, bAgent := f.addMachine(t, 900_000)
	machines := []int64{f.machine, b}
	agents := map[int64]context.Context{f.machine: f.agent, b: bAgent}
	rng := rand.New(rand.NewPCG(7, 11))
	var live []int64
	running := map[int64]bool{}
	silent := map[int64]bool{}
	seen := map[string]int{} // offer states the walk reached
	beat := func(m int64) {
		var reps []suanli.InstanceReport
		for id := range running {
			if in, err := f.svc.FindInstanceByID(f.renter, id); err == nil && in.MachineID == m && in.Status != suanli.StatusDestroyed {
				reps = append(reps, suanli.InstanceReport{ID: id, Status: suanli.StatusRunning})
			}
		}
		if _, err := f.svc.Sync(agents[m], &suanli.SyncRequest{Instances: reps}); err != nil {
			t.Fatalf("sync of machine %d: %v", m, err)
		}
	}
	search := func(svc *control.Service) []*suanli.Offer {
		t.Helper()
		res, err := svc.SearchOffers(f.renter, suanli.OfferQuery{Query: "rentable=any", Order: "id", Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		// Reliability reaches the index when it crosses a half-percent
		// step (ObserveHosts): compare the steps.
		for _, o := range res.Offers {
			o.Reliability = math.Round(o.Reliability*200) / 200
			o.Score = 0 // derived from reliability
		}
		return res.Offers
	}
	for step := 0; step < 120; step++ {
		var did string
		m := machines[rng.IntN(len(machines))]
		switch op := rng.IntN(9); {
		case op == 0:
			p := suanli.Money(300_000 + rng.IntN(10)*100_000)
			_, err := f.svc.ListMachine(f.host, m, suanli.ListingUpdate{PriceGPU: &p})
			did = fmt.Sprintf("list %d at %s (%v)", m, p, err)
		case op == 1:
			_, err := f.svc.UnlistMachine(f.host, m)
			did = fmt.Sprintf("unlist %d (%v)", m, err)
		case op <= 3:
			in, err := f.svc.CreateInstance(f.renter, suanli.InstanceCreate{OfferID: m, Image: "x", Cmd: []string{"run"}, GPUCount: 1,
				Guards: suanli.Guards{IdleStopMinutes: -1}})
			if err == nil {
				live = append(live, in.ID)
			}
			did = fmt.Sprintf("create on %d (%v)", m, err)
		case op == 4 && len(live) > 0:
			id := live[rng.IntN(len(live))]
			running[id] = true
			did = fmt.Sprintf("instance %d reported running", id)
		case op == 5 && len(live) > 0:
			id := live[rng.IntN(len(live))]
			_, err := f.svc.StopInstance(f.renter, id)
			delete(running, id)
			did = fmt.Sprintf("stop %d (%v)", id, err)
		case op == 6 && len(live) > 0:
			i := rng.IntN(len(live))
			_, err := f.svc.DestroyInstance(f.renter, live[i])
			delete(running, live[i])
			did = fmt.Sprintf("destroy %d (%v)", live[i], err)
			live = append(live[:i], live[i+1:]...)
		case op == 7:
			silent[m] = !silent[m]
			did = fmt.Sprintf("machine %d silent: %v", m, silent[m])
		default:
			f.clk.Add(time.Duration(5+rng.IntN(60)) * time.Second)
			did = "time passes"
		}
		for _, mm := range machines {
			if !silent[mm] {
				beat(mm)
			}
		}
		if err := f.svc.CheckLeases(ctx); err != nil {
			t.Fatal(err)
		}
		fresh, err := control.New(ctx, f.svc.Store, control.Config{LostAfter: 2 * time.Minute, FailoverGrace: time.Minute}, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		fresh.SetClock(f.clk.Now)
		got, want := search(f.svc), search(fresh)
		for _, o := range got {
			seen[o.HostStatus+fmt.Sprint(" rentable=", o.Rentable, " free=", o.NumGPUs)]++
		}
		if !reflect.DeepEqual(got, want) {
			for i := range max(len(got), len(want)) {
				var g, w *suanli.Offer
				if i < len(got) {
					g = got[i]
				}
				if i < len(want) {
					w = want[i]
				}
				if !reflect.DeepEqual(g, w) {
					t.Errorf("step %d (%s): live index offer\n%+v\nrebuilt from the store\n%+v", step, did, g, w)
				}
			}
			t.FailNow()
		}
	}
	// The walk must have reached the states that matter.
	for _, want := range []string{"online rentable=true free=2", "online rentable=true free=1", "online rentable=false free=0", "suspect rentable=false free=0", "offline rentable=false free=2"} {
		if seen[want] == 0 {
			t.Errorf("the random walk never reached an offer %q (reached %v): change the seed or the steps", want, seen)
		}
	}
}

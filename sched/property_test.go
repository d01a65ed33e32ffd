package sched_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/sched"
)

// world is a model of the control plane's protocol over the pure
// scheduler: plans apply (victims drain), drains end within their grace
// (SIGTERM first), and every change is followed by arbitration. A workload
// runs when it owns GPUs that no draining workload still occupies, or while
// it drains.
type world struct {
	t     *testing.T
	rng   *rand.Rand
	now   int
	grace int
	hosts []*sched.Host
	inst  map[int64]*modelInst
	next  int64
}

type modelInst struct {
	host      int
	sigtermAt int // -1: none pending
	stopBy    int
	stoppedAt int
	started   bool // its workload runs (or ran until a stop)
	log       []string
}

func (w *world) hostOf(id int64) (*sched.Host, int) {
	h := w.hosts[w.inst[id].host]
	for i := range h.Claims {
		if h.Claims[i].ID == id {
			return h, i
		}
	}
	w.t.Fatalf("instance %d has no claim", id)
	return nil, 0
}

func (w *world) preempt(h *sched.Host, v sched.Victim) {
	for i := range h.Claims {
		c := &h.Claims[i]
		if c.ID != v.ID {
			continue
		}
		if c.State != sched.Owner || c.Class != sched.ClassBid {
			w.t.Fatalf("t=%d: preempting claim %d in state %d class %d: only owner bids may be preempted", w.now, c.ID, c.State, c.Class)
		}
		c.State = sched.Draining
		m := w.inst[c.ID]
		m.sigtermAt, m.stopBy = w.now, w.now+w.grace
		m.log = append(m.log, fmt.Sprintf("t=%d SIGTERM", w.now))
	}
}

// settle runs arbitration on every host until nothing changes.
func (w *world) settle() {
	for round := 0; ; round++ {
		if round > 20 {
			w.t.Fatalf("t=%d: arbitration does not settle", w.now)
		}
		changed := false
		for _, h := range w.hosts {
			d := sched.Arbitrate(h)
			for _, v := range d.Preempt {
				w.preempt(h, v)
			}
			for _, g := range d.Resume {
				for i := range h.Claims {
					if h.Claims[i].ID == g.ID {
						h.Claims[i].State, h.Claims[i].GPUs = sched.Owner, g.GPUs
					}
				}
			}
			changed = changed || !d.Empty()
		}
		if !changed {
			return
		}
	}
}

func (w *world) check() {
	for _, h := range w.hosts {
		var owned, running sched.GPUSet
		var drainGPUs sched.GPUSet
		for _, c := range h.Claims {
			if c.State == sched.Draining {
				drainGPUs |= c.GPUs
			}
		}
		for _, c := range h.Claims {
			if c.State == sched.Owner {
				if owned&c.GPUs != 0 {
					w.t.Fatalf("t=%d host %d: GPUs %b owned twice (claim %d)", w.now, h.ID, owned&c.GPUs, c.ID)
				}
				if c.GPUs.Count() != c.Units || c.GPUs&^sched.All(len(h.GPUIndex)) != 0 {
					w.t.Fatalf("t=%d host %d: claim %d owns %b for %d units", w.now, h.ID, c.ID, c.GPUs, c.Units)
				}
				owned |= c.GPUs
			}
			m := w.inst[c.ID]
			if c.State == sched.Owner && c.GPUs&drainGPUs == 0 {
				m.started = true // the agent starts it: nothing else occupies its GPUs
			}
			runs := m.started && (c.State == sched.Draining || c.State == sched.Owner)
			if runs {
				if running&c.GPUs != 0 {
					w.t.Fatalf("t=%d host %d: GPUs %b held by two running instances (claim %d)", w.now, h.ID, running&c.GPUs, c.ID)
				}
				running |= c.GPUs
			}
			if c.State == sched.Draining {
				if m := w.inst[c.ID]; w.now > m.stopBy {
					w.t.Fatalf("t=%d: instance %d still runs past its grace (SIGTERM at %d)", w.now, c.ID, m.sigtermAt)
				}
			}
		}
		if d := sched.Arbitrate(h); !d.Empty() {
			w.t.Fatalf("t=%d host %d: not settled: %+v", w.now, h.ID, d)
		}
	}
}

func (w *world) tick() {
	w.now++
	for _, h := range w.hosts {
		for i := range h.Claims {
			c := &h.Claims[i]
			if c.State != sched.Draining {
				continue
			}
			m := w.inst[c.ID]
			// A workload that traps SIGTERM stops at some point within the
			// grace; the agent kills one that does not at the deadline.
			if w.now >= m.stopBy || w.rng.IntN(3) == 0 {
				if m.sigtermAt < 0 || m.sigtermAt > w.now {
					w.t.Fatalf("instance %d stopped at %d without SIGTERM first (log %v)", c.ID, w.now, m.log)
				}
				m.log = append(m.log, fmt.Sprintf("t=%d stopped", w.now))
				m.sigtermAt, m.stoppedAt, m.started = -1, w.now, false
				c.State, c.GPUs = sched.Waiting, 0
				c.Order = int64(w.now)
			}
		}
	}
}

func randomBid(rng *rand.Rand) suanli.Money { return suanli.Money(100_000 + 50_000*rng.IntN(10)) }

func (w *world) step() {
	ids := make([]int64, 0, len(w.inst))
	for id := range w.inst {
		ids = append(ids, id)
	}
	slices.Sort(ids) // map order is random; the test is seeded
	pick := func() (int64, bool) {
		if len(ids) == 0 {
			return 0, false
		}
		return ids[w.rng.IntN(len(ids))], true
	}
	switch op := w.rng.IntN(10); {
	case op < 4: // create
		r := sched.Request{GPUCount: 1 + w.rng.IntN(3), Count: 1 + w.rng.IntN(2)}
		if w.rng.IntN(3) > 0 {
			r.RentalType, r.Bid = suanli.RentalInterruptible, randomBid(w.rng)*suanli.Money(r.GPUCount)
		}
		res := sched.Schedule(&sched.Snapshot{Hosts: w.hosts}, r)
		for _, p := range res.Placements {
			hi := 0
			for i, h := range w.hosts {
				if h.ID == p.HostID {
					hi = i
				}
			}
			h := w.hosts[hi]
			for _, v := range p.Preempt {
				w.preempt(h, v)
			}
			w.next++
			h.Claims = append(h.Claims, sched.Claim{ID: w.next, Class: sched.ClassOf(r.RentalType), Bid: p.Rates.ComputePerHour,
				Units: p.GPUs.Count(), State: sched.Owner, GPUs: p.GPUs, Order: w.next})
			w.inst[w.next] = &modelInst{host: hi, sigtermAt: -1}
		}
	case op < 6: // destroy
		if id, ok := pick(); ok {
			h, i := w.hostOf(id)
			if h.Claims[i].State == sched.Draining {
				return // destroying waits for the drain in this model
			}
			h.Claims = append(h.Claims[:i], h.Claims[i+1:]...)
			delete(w.inst, id)
		}
	case op < 7: // change a bid
		if id, ok := pick(); ok {
			h, i := w.hostOf(id)
			if h.Claims[i].Class == sched.ClassBid && h.Claims[i].State != sched.Draining {
				h.Claims[i].Bid = randomBid(w.rng) * suanli.Money(h.Claims[i].Units)
			}
		}
	case op < 8: // the renter stops, or queues a start
		if id, ok := pick(); ok {
			h, i := w.hostOf(id)
			switch h.Claims[i].State {
			case sched.Owner:
				h.Claims[i].State, h.Claims[i].GPUs = 0, 0 // stopped: holds nothing, wants nothing
				w.inst[id].started = false
			case 0:
				h.Claims[i].State, h.Claims[i].Order = sched.Waiting, int64(w.now)
			}
		}
	case op < 9: // the host changes its listing
		h := w.hosts[w.rng.IntN(len(w.hosts))]
		h.Listing.Listed = !h.Listing.Listed
		h.Listing.MinBid = suanli.Money(w.rng.IntN(3)) * 100_000
	default:
		w.tick()
	}
	w.settle()
	w.check()
}

// TestPropertyRandomSequences runs random sequences of create (single and
// fleet, on-demand and bids), destroy, bid changes, stop/start and host
// listing changes, and checks after every step: no GPU is owned twice or
// held by two running workloads; no preempted workload runs past its grace
// (the next owner waits for it); every stop of a preempted workload came
// after its SIGTERM; and arbitration has settled (no waiting claim outranks
// an owner it could replace).
func TestPropertyRandomSequences(t *testing.T) {
	for seed := uint64(1); seed <= 200; seed++ {
		w := &world{t: t, rng: rand.New(rand.NewPCG(seed, 7)), grace: 3, inst: map[int64]*modelInst{}}
		for i := 0; i < 3; i++ {
			w.hosts = append(w.hosts, mkHost(int64(i+1), 1+w.rng.IntN(4), suanli.Money(300_000+100_000*i), 100_000))
		}
		for n := 0; n < 150; n++ {
			w.step()
		}
	}
}

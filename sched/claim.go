package sched

import (
	"math/bits"
	"slices"

	"github.com/suanli/suanli"
)

// Class ranks rentals before bids are compared: a firm rental (on-demand or
// reserved) outranks every bid (DESIGN §4). The zero value is ClassBid.
type Class int8

// The classes, lowest first.
const (
	ClassBid  Class = iota // interruptible: ranked by bid per unit
	ClassFirm              // on-demand, reserved: never preempted by other renters
)

// ClassOf returns the class of a rental type; anything but interruptible is firm.
func ClassOf(rentalType string) Class {
	if rentalType == suanli.RentalInterruptible {
		return ClassBid
	}
	return ClassFirm
}

// GPUSet is a set of GPU positions on one host: bit i is the host's i-th GPU
// (Host.GPUIndex[i] is its index as the agent knows it). Hosts have at most
// MaxGPUs GPUs. The zero value is the empty set.
type GPUSet uint64

// MaxGPUs is the most GPUs one host may have for the scheduler.
const MaxGPUs = 64

// Count is the number of GPUs in s.
func (s GPUSet) Count() int { return bits.OnesCount64(uint64(s)) }

// Has reports whether position i is in s.
func (s GPUSet) Has(i int) bool { return s&(1<<uint(i)) != 0 }

// All is the set of positions 0..n-1.
func All(n int) GPUSet {
	if n >= 64 {
		return ^GPUSet(0)
	}
	return GPUSet(1)<<uint(n) - 1
}

// Take returns the n lowest positions of s (fewer when s is smaller).
func (s GPUSet) Take(n int) GPUSet {
	var out GPUSet
	for ; n > 0 && s != 0; n-- {
		low := s & -s
		out |= low
		s &^= low
	}
	return out
}

// Positions lists the positions in s, ascending.
func (s GPUSet) Positions() []int {
	out := make([]int, 0, s.Count())
	for s != 0 {
		i := bits.TrailingZeros64(uint64(s))
		out = append(out, i)
		s &^= 1 << uint(i)
	}
	return out
}

// ClaimState is where a claim stands on its host.
type ClaimState int8

// Claim states.
const (
	// Owner holds its units now (its instance is pending, starting, running,
	// stopping, or lost with its host).
	Owner ClaimState = iota + 1
	// Waiting wants units and does not hold them: an interruptible instance
	// that was preempted, or a start queued behind other rentals. Waiting
	// claims win units in priority order, before any new request of the
	// same priority.
	Waiting
	// Draining lost its units to a higher claim and is being stopped (its
	// workload has had SIGTERM and runs out its grace). It owns nothing, but
	// occupies GPUs until it stops: whoever owns those GPUs now must not
	// start before.
	Draining
)

// Claim is one instance's hold, or wish, on a host's GPUs (GPU hosts) or
// cores (CPU-only hosts). It is plain data; the store builds claims from
// live instances.
type Claim struct {
	ID    int64 // the instance
	Class Class
	Bid   suanli.Money // per hour for the whole claim (ClassBid)
	Units int          // GPUs on a GPU host, cores on a CPU-only host
	State ClaimState
	GPUs  GPUSet // owned (Owner) or occupied (Draining); empty otherwise
	RAMMB int64
	// Order breaks ties between claims of equal priority: smaller first
	// (the time a wait began, or the instance's creation).
	Order int64
	// Version is the instance's version, so that the store can tell a stale
	// plan from a current one.
	Version int64
}

// outranks reports whether a comes before b in the order claims win units:
// firm before bids; among bids the higher bid per unit; then owners before
// waiters (an equal bid never preempts); then Order, then ID.
func outranks(a, b *Claim) bool {
	if a.Class != b.Class {
		return a.Class > b.Class
	}
	if a.Class == ClassBid {
		if c := cmpBidPerUnit(a.Bid, a.Units, b.Bid, b.Units); c != 0 {
			return c > 0
		}
	}
	if (a.State == Owner) != (b.State == Owner) {
		return a.State == Owner
	}
	if a.Order != b.Order {
		return a.Order < b.Order
	}
	return a.ID < b.ID
}

// cmpBidPerUnit compares bidA/unitsA with bidB/unitsB exactly (128-bit
// cross products): -1, 0 or +1.
func cmpBidPerUnit(bidA suanli.Money, unitsA int, bidB suanli.Money, unitsB int) int {
	ua, ub := uint64(max(unitsA, 1)), uint64(max(unitsB, 1))
	ba, bb := uint64(max(bidA, 0)), uint64(max(bidB, 0))
	ahi, alo := bits.Mul64(ba, ub)
	bhi, blo := bits.Mul64(bb, ua)
	switch {
	case ahi != bhi:
		if ahi > bhi {
			return 1
		}
		return -1
	case alo != blo:
		if alo > blo {
			return 1
		}
		return -1
	}
	return 0
}

// Outranks reports whether a rental of class ca bidding bidA for unitsA
// units beats one of class cb bidding bidB for unitsB (a newcomer never beats
// an equal incumbent). It is the rule the scheduler applies, for callers
// that explain decisions.
func Outranks(ca Class, bidA suanli.Money, unitsA int, cb Class, bidB suanli.Money, unitsB int) bool {
	if ca != cb {
		return ca > cb
	}
	return ca == ClassBid && cmpBidPerUnit(bidA, unitsA, bidB, unitsB) > 0
}

// Grant is units given to a claim that did not hold them: the positions
// (GPU hosts) it now owns.
type Grant struct {
	ID      int64
	Version int64
	GPUs    GPUSet
	Units   int
}

// Victim is an owner claim that loses its units: it must be preempted.
type Victim struct {
	ID      int64
	Version int64
	Bid     suanli.Money
	Units   int
	GPUs    GPUSet
}

// arbiter runs the one rule that decides who holds a host's units, with
// scratch space reused between calls so that placement at scale does not
// allocate per candidate. The zero value is ready to use; it is not safe for
// concurrent use.
type arbiter struct {
	order []*Claim
	win   []bool
}

// outcome is an arbitration over one host's claims plus, optionally, a
// newcomer: who keeps, who loses, what the newcomer and the waiting winners
// get.
type outcome struct {
	newWins  bool
	newGPUs  GPUSet
	victims  []Victim // owners that lose, in the order they lose (lowest first)
	grants   []Grant  // waiting claims that win, with their positions
	shortBy  int      // units the newcomer lacks when it loses
	firmHeld int      // units held by owners of ClassFirm or by bids the newcomer does not outrank
}

// arbitrate ranks the owner and waiting claims of h (draining ones own
// nothing) together with newcomer nc (nil for none) and gives units in that
// order: each claim wins when it fits in what the claims before it left.
// Owners that win keep their positions; the newcomer, then waiting winners
// in rank order, get positions from the rest, free GPUs (not occupied by a
// draining claim) first, then those of losing owners.
func (a *arbiter) arbitrate(h *Host, nc *Claim, out *outcome) {
	*out = outcome{victims: out.victims[:0], grants: out.grants[:0]}
	a.order = a.order[:0]
	for i := range h.Claims {
		c := &h.Claims[i]
		if c.State == Owner || c.State == Waiting {
			a.order = append(a.order, c)
		}
	}
	if nc != nil {
		a.order = append(a.order, nc)
	}
	if len(a.order) > 1 {
		slices.SortFunc(a.order, func(x, y *Claim) int {
			if outranks(x, y) {
				return -1
			}
			return 1
		})
	}
	total := h.Units()
	a.win = slices.Grow(a.win[:0], len(a.order))[:len(a.order)]
	granted := 0
	var kept GPUSet // positions of owners that win
	for i, c := range a.order {
		if granted+c.Units <= total {
			a.win[i] = true
			granted += c.Units
			if c.State == Owner {
				kept |= c.GPUs
			}
		} else {
			a.win[i] = false
			if c == nc {
				out.shortBy = granted + c.Units - total
			}
		}
		if nc != nil && c != nc && c.State == Owner && !outranks(nc, c) {
			out.firmHeld += c.Units
		}
	}
	if !h.IsGPU() {
		for i, c := range a.order {
			switch {
			case c == nc:
				out.newWins = a.win[i]
			case c.State == Owner && !a.win[i]:
				out.victims = append(out.victims, Victim{ID: c.ID, Version: c.Version, Bid: c.Bid, Units: c.Units})
			case c.State == Waiting && a.win[i]:
				out.grants = append(out.grants, Grant{ID: c.ID, Version: c.Version, Units: c.Units})
			}
		}
		slices.Reverse(out.victims)
		return
	}
	var draining, losing GPUSet
	for i := range h.Claims {
		if h.Claims[i].State == Draining {
			draining |= h.Claims[i].GPUs
		}
	}
	for i, c := range a.order {
		if c.State == Owner && !a.win[i] {
			losing |= c.GPUs
			out.victims = append(out.victims, Victim{ID: c.ID, Version: c.Version, Bid: c.Bid, Units: c.Units, GPUs: c.GPUs})
		}
	}
	slices.Reverse(out.victims)
	// Positions not kept by winning owners, best first: free now, then
	// occupied by a draining claim (free within its grace), then those of
	// owners that lose (free after their grace).
	pool := All(len(h.GPUIndex)) &^ kept
	free, drn, los := pool&^draining&^losing, pool&draining&^losing, pool&losing
	pick := func(n int) GPUSet {
		g := free.Take(n)
		free &^= g
		if k := n - g.Count(); k > 0 {
			d := drn.Take(k)
			drn &^= d
			g |= d
		}
		if k := n - g.Count(); k > 0 {
			l := los.Take(k)
			los &^= l
			g |= l
		}
		return g
	}
	// The newcomer picks first (it is why this plan exists), then the
	// waiting winners in rank order.
	if nc != nil {
		for i, c := range a.order {
			if c == nc && a.win[i] {
				out.newWins, out.newGPUs = true, pick(c.Units)
			}
		}
	}
	for i, c := range a.order {
		if a.win[i] && c.State == Waiting && c != nc {
			out.grants = append(out.grants, Grant{ID: c.ID, Version: c.Version, GPUs: pick(c.Units), Units: c.Units})
		}
	}
}

// Decision is what a host's claims should become: owners to preempt and
// waiting claims to resume, with the GPUs each resumed claim gets.
type Decision struct {
	HostID  int64
	Preempt []Victim
	Resume  []Grant
}

// Empty reports whether d changes nothing.
func (d *Decision) Empty() bool { return len(d.Preempt) == 0 && len(d.Resume) == 0 }

// Arbitrate decides who holds h's units now, by the rule every placement
// follows (firm before bids, higher bid per unit first, owners before
// waiters at equal rank, then in queue order): waiting claims that win are
// resumed, owners that lose are preempted. The control plane runs it when
// units are freed or bids change.
func Arbitrate(h *Host) Decision {
	var a arbiter
	var out outcome
	a.arbitrate(h, nil, &out)
	return Decision{HostID: h.ID, Preempt: slices.Clone(out.victims), Resume: slices.Clone(out.grants)}
}

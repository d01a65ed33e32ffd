package sched

import (
	"fmt"
	"slices"

	"github.com/suanli/suanli"
)

// Host is one machine as the scheduler sees it: hardware, terms, lease
// status and the claims of its live instances. It is plain data built by the
// caller (HostFromMachine for the control plane); the scheduler never
// changes a Host it is given.
type Host struct {
	ID         int64
	OwnerID    int64
	GPUName    string
	GPUMemMB   int64
	GPUIndex   []int    // the agent's index of each GPU position; empty on CPU-only hosts
	GPUUUID    []string // parallel to GPUIndex when known
	CPUCores   int
	RAMMB      int64
	DiskFreeGB int64
	Region     string
	Country    string
	Status     string // machine lease status: online, suspect, offline
	Simulated  bool
	// Expired is set by the caller when the listing's end date has passed
	// (the scheduler reads no clock).
	Expired bool
	Listing suanli.Listing
	Claims  []Claim
	// Holds are the bookings of the host's GPUs that have not ended
	// (the forward market), in no particular order.
	Holds []Hold
}

// IsGPU reports whether h is rented by the GPU (else by the core).
func (h *Host) IsGPU() bool { return len(h.GPUIndex) > 0 }

// Units is what h rents: its GPUs, or its cores when it has none.
func (h *Host) Units() int {
	if h.IsGPU() {
		return len(h.GPUIndex)
	}
	return h.CPUCores
}

// Owned returns the GPU positions held by owner claims.
func (h *Host) Owned() GPUSet {
	var s GPUSet
	for i := range h.Claims {
		if h.Claims[i].State == Owner {
			s |= h.Claims[i].GPUs
		}
	}
	return s
}

// FreeUnits is the units no owner holds: GPUs, or cores on a CPU-only host.
func (h *Host) FreeUnits() int {
	if h.IsGPU() {
		return len(h.GPUIndex) - h.Owned().Count()
	}
	n := h.CPUCores
	for i := range h.Claims {
		if h.Claims[i].State == Owner {
			n -= h.Claims[i].Units
		}
	}
	return n
}

// Indexes maps a set of positions to the agent's GPU indexes, ascending by position.
func (h *Host) Indexes(s GPUSet) []int {
	ps := s.Positions()
	for i, p := range ps {
		ps[i] = h.GPUIndex[p]
	}
	return ps
}

// SetOf maps GPU indexes to positions; indexes h does not have are ignored.
func (h *Host) SetOf(indexes []int) GPUSet {
	var s GPUSet
	for _, idx := range indexes {
		if p := slices.Index(h.GPUIndex, idx); p >= 0 && p < MaxGPUs {
			s |= 1 << uint(p)
		}
	}
	return s
}

// ClaimState returns the state a live instance's claim is in, from its
// status and desired state; ok is false for an instance that neither holds
// nor wants units (stopped by its renter, exited, failed, destroyed).
func ClaimStateOf(in *suanli.Instance) (ClaimState, bool) {
	switch in.Status {
	case suanli.StatusDestroyed, suanli.StatusExited, suanli.StatusFailed:
		return 0, false
	case suanli.StatusPreempting:
		return Draining, true
	case suanli.StatusPreempted, suanli.StatusStopped:
		if in.Desired == suanli.DesiredRunning {
			return Waiting, true
		}
		return 0, false
	}
	return Owner, true
}

// ClaimOf returns the claim of a live instance on host h (see ClaimStateOf).
// order is when its wait began (0: its creation order, the id).
func ClaimOf(h *Host, in *suanli.Instance, order int64) (Claim, bool) {
	st, ok := ClaimStateOf(in)
	if !ok {
		return Claim{}, false
	}
	c := Claim{ID: in.ID, Class: ClassOf(in.RentalType), Bid: in.Bid, State: st, RAMMB: int64(in.RAMGB * 1024), Version: in.Version}
	if order == 0 {
		order = in.ID
	}
	c.Order = order
	if h.IsGPU() {
		c.Units = in.GPUCount
		if st != Waiting {
			c.GPUs = h.SetOf(in.GPUIndexes)
		}
	} else {
		c.Units = in.CPUCores
	}
	if c.Class == ClassBid && c.Bid <= 0 {
		c.Bid = in.Rates.ComputePerHour
	}
	return c, true
}

// HostFromMachine builds a Host from a machine and its live instances.
// expired says whether the listing's end date has passed; waitSince gives,
// per instance id, when its wait began (for queue order; missing means its id).
func HostFromMachine(m *suanli.Machine, live []*suanli.Instance, expired bool, waitSince map[int64]int64) *Host {
	h := &Host{ID: m.ID, OwnerID: m.OwnerID, CPUCores: m.Hardware.CPUCores, RAMMB: m.Hardware.RAMMB,
		DiskFreeGB: m.Hardware.DiskFreeGB, Region: m.Region, Country: m.Country, Status: m.Status,
		Simulated: m.Simulated, Expired: expired, Listing: m.Listing}
	for _, g := range m.Hardware.GPUs {
		h.GPUIndex = append(h.GPUIndex, g.Index)
		h.GPUUUID = append(h.GPUUUID, g.UUID)
		if h.GPUName == "" {
			h.GPUName, h.GPUMemMB = g.Name, g.MemoryMB
		}
	}
	for _, in := range live {
		if in.MachineID != m.ID {
			continue
		}
		if c, ok := ClaimOf(h, in, waitSince[in.ID]); ok {
			h.Claims = append(h.Claims, c)
		}
	}
	return h
}

// describeHolders says who holds the units a newcomer cannot have, for a
// rejection: "3 of 4 GPUs are held by on-demand rentals or bids at least
// yours".
func describeShort(h *Host, r *Request, n int, out *outcome) string {
	unit := "GPUs"
	if !h.IsGPU() {
		unit = "CPU cores"
	}
	free := h.FreeUnits()
	who := "on-demand or reserved rentals"
	if ClassOf(r.RentalType) == ClassBid {
		who = "on-demand rentals or bids at or above yours"
	}
	var waiting int
	for i := range h.Claims {
		if h.Claims[i].State == Waiting {
			waiting += h.Claims[i].Units
		}
	}
	s := fmt.Sprintf("offer %d has %d free %s, you asked for %d: %d of its %d are held by %s", h.ID, free, unit, n, out.firmHeld, h.Units(), who)
	if waiting > 0 {
		s += fmt.Sprintf("; %d more are wanted by preempted or queued rentals", waiting)
	}
	return s
}

// gpuNameMatch compares GPU model names the way the query language does:
// case-insensitive, with "_" as a space.
func gpuNameMatch(have string, want []string) bool {
	if len(want) == 0 {
		return true
	}
	for _, w := range want {
		if sameName(w, have) {
			return true
		}
	}
	return false
}

// sameName compares names case-insensitively (ASCII) with "_" and " "
// alike, without allocating: it runs for every candidate host.
func sameName(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if x == '_' {
			x = ' '
		}
		if y == '_' {
			y = ' '
		}
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

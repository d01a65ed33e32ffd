package sched

import (
	"fmt"
	"slices"

	"github.com/suanli/suanli"
)

// Request is what a renter asks: Place reads the first six fields (one
// machine); Schedule reads them all (any number of hosts, Count instances).
type Request struct {
	GPUCount   int // GPUs per instance; 0: every free GPU (GPU machines)
	CPUCores   int // CPU-only machines; 0: every free core
	DiskGB     int64
	RentalType string
	Bid        suanli.Money // per hour for the whole instance (interruptible)
	FeeBP      int64        // platform fee in basis points

	GPUNames    []string // any of these models (case-insensitive, _ as space); empty: any
	MinGPUMemMB int64    // per GPU
	MinCPUCores int      // allotted with the GPUs (GPU hosts)
	MinRAMMB    int64    // allotted with the GPUs or cores
	Regions     []string // any of; empty: any
	Countries   []string // ISO 3166 alpha-2, any of; empty: any
	// AccountResidency and RentalResidency are data-residency lists
	// (countries or regions, see CheckResidency): the account's and the
	// rental's own; empty allows anywhere.
	AccountResidency []string
	RentalResidency  []string
	MaxPrice         suanli.Money // compute per hour for one instance; 0: no limit
	// AccountID is the renter: a simulated host is rentable only by its
	// owner unless AllowSimulated.
	AccountID      int64
	AllowSimulated bool
	// Count is how many instances to place (0 means 1); with AllOrNothing
	// a plan that cannot place them all places none.
	Count        int
	AllOrNothing bool
	// At is now and Until the end of the rental (unix microseconds; Until
	// 0: open-ended), for the hosts' bookings: a firm rental must not
	// overlap them. The scheduler reads no clock.
	At, Until int64
	// BookingID is the booking this request launches: its own hold does
	// not count against it.
	BookingID int64
}

// Usage is what a machine's live instances hold now.
type Usage struct {
	GPUs     []int // indexes
	CPUCores int
	RAMMB    int64
}

// Plan is a placement on one machine.
type Plan struct {
	GPUIndexes []int
	GPUUUIDs   []string
	CPUCores   int
	RAMMB      int64
	Rates      suanli.Rates
	// HourlyCost is compute plus storage per hour.
	HourlyCost suanli.Money
}

// FreeGPUs returns the indexes of m's GPUs not in use, ascending.
func FreeGPUs(m *suanli.Machine, used []int) []int {
	var free []int
	for _, g := range m.Hardware.GPUs {
		if !slices.Contains(used, g.Index) {
			free = append(free, g.Index)
		}
	}
	return free
}

// Place plans req on machine m given its usage. The error is an *suanli.Error
// that says what is free.
func Place(m *suanli.Machine, u Usage, req Request) (*Plan, error) {
	if req.DiskGB > m.Hardware.DiskFreeGB && m.Hardware.DiskFreeGB > 0 {
		return nil, suanli.Errorf(suanli.ECONFLICT, "offer %d has %d GB of free disk, you asked for %d GB", m.ID, m.Hardware.DiskFreeGB, req.DiskGB)
	}
	l := m.Listing
	p := &Plan{}
	if m.IsGPU() {
		free := FreeGPUs(m, u.GPUs)
		n := req.GPUCount
		if n == 0 {
			n = len(free)
		}
		if n <= 0 || n > len(free) {
			return nil, suanli.Errorf(suanli.ECONFLICT, "offer %d has %d free GPUs, you asked for %d", m.ID, len(free), max(n, 1))
		}
		total := len(m.Hardware.GPUs)
		p.GPUIndexes = free[:n]
		for _, idx := range p.GPUIndexes {
			for _, g := range m.Hardware.GPUs {
				if g.Index == idx {
					p.GPUUUIDs = append(p.GPUUUIDs, g.UUID)
				}
			}
		}
		p.CPUCores = max(1, m.Hardware.CPUCores*n/total)
		p.RAMMB = m.Hardware.RAMMB * int64(n) / int64(total)
		p.Rates.ComputePerHour = l.PriceGPU * suanli.Money(n)
	} else {
		freeCores := m.Hardware.CPUCores - u.CPUCores
		n := req.CPUCores
		if n == 0 {
			n = freeCores
		}
		if n <= 0 || n > freeCores {
			return nil, suanli.Errorf(suanli.ECONFLICT, "offer %d has %d free CPU cores, you asked for %d", m.ID, freeCores, max(n, 1))
		}
		p.CPUCores = n
		p.RAMMB = m.Hardware.RAMMB * int64(n) / int64(max(1, m.Hardware.CPUCores))
		ramGB := suanli.MulDiv(l.PriceRAM, p.RAMMB, 1024)
		p.Rates.ComputePerHour = l.PriceCPU*suanli.Money(n) + ramGB
	}
	switch req.RentalType {
	case suanli.RentalInterruptible:
		min := MinBid(m, len(p.GPUIndexes), p.CPUCores)
		if req.Bid < min {
			return nil, suanli.FieldErrorf("bid", "%s/h is below this offer's minimum bid of %s/h", req.Bid, min)
		}
		p.Rates.ComputePerHour = req.Bid
	case suanli.RentalOnDemand, "":
	default:
		return nil, suanli.FieldErrorf("rental_type", "%q is not a rental type: use on-demand or interruptible", req.RentalType)
	}
	p.Rates.StoragePerMonth = l.PriceDisk
	p.Rates.InetUpPerGB = l.PriceInetUp
	p.Rates.InetDownPerGB = l.PriceInetDown
	p.Rates.FeeBasisPoints = req.FeeBP
	p.HourlyCost = p.Rates.ComputePerHour + p.Rates.StoragePerHour(req.DiskGB)
	return p, nil
}

// MinBid is the least an interruptible rental of gpus GPUs (or cores on a
// CPU machine) may bid per hour.
func MinBid(m *suanli.Machine, gpus, cores int) suanli.Money {
	if m.IsGPU() {
		return m.Listing.MinBid * suanli.Money(gpus)
	}
	return m.Listing.MinBid * suanli.Money(cores)
}

// Describe is a one-line summary of a plan for logs and events.
func (p *Plan) Describe() string {
	return fmt.Sprintf("gpus %v, %d cores, %d MB RAM, %s/h", p.GPUIndexes, p.CPUCores, p.RAMMB, p.Rates.ComputePerHour)
}

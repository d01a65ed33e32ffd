package sched

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/suanli/suanli"
)

// Snapshot is the plain data a plan is made from: the candidate hosts with
// their claims. The scheduler reads it and never changes it.
type Snapshot struct {
	Hosts []*Host
}

// Placement is one instance placed on one host: the GPUs (or cores) it
// gets, the rates it locks, and the owners it preempts to get them.
type Placement struct {
	HostID     int64
	GPUs       GPUSet   // positions on the host
	GPUIndexes []int    // the agent's indexes of those GPUs
	GPUUUIDs   []string // when the host's are known
	CPUCores   int
	RAMMB      int64
	Rates      suanli.Rates
	HourlyCost suanli.Money // compute plus storage per hour
	// Preempt are the interruptible instances that lose their units to
	// this placement, lowest bid first. Empty when it takes free units.
	Preempt []Victim
}

// Rejection is why one host could not take (the next instance of) a request.
type Rejection struct {
	HostID int64  `json:"host_id"`
	Step   string `json:"step"`            // the pipeline step: listed, online, gpu_name, capacity, bid …
	Field  string `json:"field,omitempty"` // the request field at fault, when it is the request's ("bid", "max_price")
	Reason string `json:"reason"`          // a sentence a person can act on
}

// Result is a plan: the placements made, how many were wanted, and a
// reason for every host that could not take the first instance left
// unplaced (or, when all were placed, the last one).
type Result struct {
	Placements []Placement
	Wanted     int
	Rejections []Rejection
	// Dropped is how many placements an all-or-nothing request found before
	// it gave up (Placements is then empty).
	Dropped int
}

// Complete reports whether every wanted instance was placed.
func (r *Result) Complete() bool { return len(r.Placements) == r.Wanted }

// Why summarises the rejections in one line per distinct reason step, for
// error messages: "host 3: … ; host 5: …" (at most max hosts, 0 for all).
func (r *Result) Why(max int) string {
	var parts []string
	for i, rj := range r.Rejections {
		if max > 0 && i == max {
			parts = append(parts, fmt.Sprintf("and %d more hosts", len(r.Rejections)-max))
			break
		}
		parts = append(parts, rj.Reason)
	}
	if len(parts) == 0 {
		return "no host matched"
	}
	return strings.Join(parts, "; ")
}

// check is one feasibility step of the pipeline: it returns "" when host h
// may take request r, else the reason. field names the request field at
// fault when the request, not the host, is what would have to change.
type check struct {
	step  string
	field string
	fn    func(h *Host, r *Request) string
}

// checks run in order; the first that fails rejects the host.
var checks = []check{
	{"listed", "", func(h *Host, r *Request) string {
		if !h.Listing.Listed {
			return fmt.Sprintf("offer %d is not listed", h.ID)
		}
		return ""
	}},
	{"online", "", func(h *Host, r *Request) string {
		if h.Status != "" && h.Status != suanli.MachineOnline {
			return fmt.Sprintf("offer %d: its host is %s (it missed heartbeats)", h.ID, h.Status)
		}
		return ""
	}},
	{"end_date", "", func(h *Host, r *Request) string {
		if h.Expired {
			return fmt.Sprintf("offer %d: its listing has ended", h.ID)
		}
		return ""
	}},
	{"simulated", "", func(h *Host, r *Request) string {
		if h.Simulated && !r.AllowSimulated && h.OwnerID != r.AccountID {
			return fmt.Sprintf("offer %d has simulated GPUs: only its owner may rent it on this marketplace", h.ID)
		}
		return ""
	}},
	{"residency", "allowed_countries", func(h *Host, r *Request) string {
		return residencyWhy(h.ID, h.Country, h.Region, r.AccountResidency, r.RentalResidency)
	}},
	{"kind", "num_gpus", func(h *Host, r *Request) string {
		if !h.IsGPU() && (r.GPUCount > 0 || len(r.GPUNames) > 0 || r.MinGPUMemMB > 0) {
			return fmt.Sprintf("offer %d is CPU-only, you asked for GPUs", h.ID)
		}
		if h.IsGPU() && r.CPUCores > 0 && r.GPUCount == 0 {
			return fmt.Sprintf("offer %d is rented by the GPU: ask for GPUs, not cores", h.ID)
		}
		if len(h.GPUIndex) > MaxGPUs {
			return fmt.Sprintf("offer %d has %d GPUs: the scheduler places on hosts with at most %d", h.ID, len(h.GPUIndex), MaxGPUs)
		}
		return ""
	}},
	{"gpu_name", "gpu_name", func(h *Host, r *Request) string {
		if h.IsGPU() && !gpuNameMatch(h.GPUName, r.GPUNames) {
			return fmt.Sprintf("offer %d has %s, you asked for %s", h.ID, h.GPUName, strings.Join(r.GPUNames, " or "))
		}
		return ""
	}},
	{"gpu_ram", "gpu_ram", func(h *Host, r *Request) string {
		if h.IsGPU() && h.GPUMemMB < r.MinGPUMemMB {
			return fmt.Sprintf("offer %d: its GPUs have %d GB, you asked for at least %d GB", h.ID, h.GPUMemMB/1024, (r.MinGPUMemMB+1023)/1024)
		}
		return ""
	}},
	{"region", "region", func(h *Host, r *Request) string {
		if len(r.Regions) > 0 && !containsFold(r.Regions, h.Region) {
			return fmt.Sprintf("offer %d is in region %q, you asked for %s", h.ID, h.Region, strings.Join(r.Regions, " or "))
		}
		return ""
	}},
	{"country", "country", func(h *Host, r *Request) string {
		if len(r.Countries) > 0 && !containsFold(r.Countries, h.Country) {
			return fmt.Sprintf("offer %d is in country %q, you asked for %s", h.ID, h.Country, strings.Join(r.Countries, " or "))
		}
		return ""
	}},
	{"disk", "disk_gb", func(h *Host, r *Request) string {
		if h.DiskFreeGB > 0 && r.DiskGB > h.DiskFreeGB {
			return fmt.Sprintf("offer %d has %d GB of free disk, you asked for %d GB", h.ID, h.DiskFreeGB, r.DiskGB)
		}
		return ""
	}},
	{"size", "num_gpus", func(h *Host, r *Request) string {
		if h.IsGPU() && r.GPUCount > len(h.GPUIndex) {
			return fmt.Sprintf("offer %d has %d GPUs in all, you asked for %d", h.ID, len(h.GPUIndex), r.GPUCount)
		}
		if !h.IsGPU() && r.CPUCores > h.CPUCores {
			return fmt.Sprintf("offer %d has %d CPU cores in all, you asked for %d", h.ID, h.CPUCores, r.CPUCores)
		}
		return ""
	}},
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if sameName(x, s) {
			return true
		}
	}
	return false
}

// sizing is what one instance of r gets on h and what it costs.
type sizing struct {
	units int
	cores int
	ramMB int64
	rates suanli.Rates
}

// size works out the allotment and rates of one instance of r on h, and
// checks what depends on them (minimum cores and RAM, maximum price,
// minimum bid). It returns the failed step, field and reason, if any.
func size(h *Host, r *Request) (sizing, string, string, string) {
	var z sizing
	l := h.Listing
	if h.IsGPU() {
		total := len(h.GPUIndex)
		z.units = r.GPUCount
		if z.units == 0 {
			z.units = h.FreeUnits()
			if z.units == 0 {
				return z, "capacity", "", fmt.Sprintf("offer %d has no free GPUs", h.ID)
			}
		}
		z.cores = max(1, h.CPUCores*z.units/total)
		z.ramMB = h.RAMMB * int64(z.units) / int64(total)
		z.rates.ComputePerHour = l.PriceGPU * suanli.Money(z.units)
	} else {
		z.units = r.CPUCores
		if z.units == 0 {
			z.units = h.FreeUnits()
			if z.units <= 0 {
				return z, "capacity", "", fmt.Sprintf("offer %d has no free CPU cores", h.ID)
			}
		}
		z.cores = z.units
		z.ramMB = h.RAMMB * int64(z.units) / int64(max(1, h.CPUCores))
		z.rates.ComputePerHour = l.PriceCPU*suanli.Money(z.units) + suanli.MulDiv(l.PriceRAM, z.ramMB, 1024)
	}
	if r.MinCPUCores > 0 && z.cores < r.MinCPUCores {
		return z, "cpu_cores", "cpu_cores", fmt.Sprintf("offer %d gives %d CPU cores with %d GPUs, you asked for at least %d", h.ID, z.cores, z.units, r.MinCPUCores)
	}
	if r.MinRAMMB > 0 && z.ramMB < r.MinRAMMB {
		return z, "cpu_ram", "cpu_ram", fmt.Sprintf("offer %d gives %d GB of RAM with this rental, you asked for at least %d GB", h.ID, z.ramMB/1024, (r.MinRAMMB+1023)/1024)
	}
	switch r.RentalType {
	case suanli.RentalInterruptible:
		min := l.MinBid * suanli.Money(z.units)
		if r.Bid < min {
			return z, "bid", "bid", fmt.Sprintf("%s/h is below offer %d's minimum bid of %s/h for %d %s", r.Bid, h.ID, min, z.units, unitWord(h, z.units))
		}
		z.rates.ComputePerHour = r.Bid
	case suanli.RentalOnDemand, suanli.RentalReserved, suanli.RentalBooked, "":
		if r.MaxPrice > 0 && z.rates.ComputePerHour > r.MaxPrice {
			return z, "max_price", "max_price", fmt.Sprintf("offer %d costs %s/h for %d %s, above your maximum of %s/h", h.ID, z.rates.ComputePerHour, z.units, unitWord(h, z.units), r.MaxPrice)
		}
	default:
		return z, "rental_type", "rental_type", fmt.Sprintf("%q is not a rental type: use on-demand or interruptible", r.RentalType)
	}
	z.rates.StoragePerMonth = l.PriceDisk
	z.rates.InetUpPerGB = l.PriceInetUp
	z.rates.InetDownPerGB = l.PriceInetDown
	z.rates.FeeBasisPoints = r.FeeBP
	return z, "", "", ""
}

func unitWord(h *Host, n int) string {
	switch {
	case h.IsGPU() && n == 1:
		return "GPU"
	case h.IsGPU():
		return "GPUs"
	case n == 1:
		return "core"
	}
	return "cores"
}

// candidate is a host that can take the next instance, and how.
type candidate struct {
	host     int // index into the working hosts
	z        sizing
	gpus     GPUSet
	victims  []Victim
	preempts int          // units preempted
	victimB  suanli.Money // sum of the victims' bids
}

// better ranks candidates: taking free units before preempting anyone,
// then the cheapest for the renter, then the least bid displaced, then the
// tightest fit (fewest units left free, to keep big holes for big
// requests), then the lowest host id.
func better(a, b *candidate, ha, hb *Host) bool {
	if (a.preempts == 0) != (b.preempts == 0) {
		return a.preempts == 0
	}
	if c := cmp.Compare(a.z.rates.ComputePerHour, b.z.rates.ComputePerHour); c != 0 {
		return c < 0
	}
	if a.preempts != b.preempts {
		return a.preempts < b.preempts
	}
	if a.victimB != b.victimB {
		return a.victimB < b.victimB
	}
	if fa, fb := ha.FreeUnits()-a.z.units, hb.FreeUnits()-b.z.units; fa != fb {
		return fa < fb
	}
	return ha.ID < hb.ID
}

// Schedule plans r.Count instances (at least one) over the snapshot's
// hosts. For each instance it runs every host through the feasibility
// pipeline (listed, online, end date, simulated, GPU or CPU, model, VRAM,
// region, country, disk, size, then the allotment's cores, RAM, price and
// minimum bid), arbitrates each remaining host's claims with the newcomer
// (firm before bids, higher bid per unit first, owners before waiters at
// equal rank), and takes the best host that can give it units. Later
// instances see the earlier ones placed and their victims draining. Every
// host that could not take the first unplaced instance gets a Rejection.
//
// Schedule is pure: the same snapshot and request give the same plan.
func Schedule(snap *Snapshot, r Request) *Result {
	want := max(r.Count, 1)
	res := &Result{Wanted: want}
	hosts := slices.Clone(snap.Hosts)
	cloned := make([]bool, len(hosts))
	var a arbiter
	var out outcome
	for k := 0; k < want; k++ {
		res.Rejections = res.Rejections[:0]
		var best *candidate
		for i, h := range hosts {
			c := &candidate{}
			rj, ok := evaluate(&a, &out, h, &r, c)
			if !ok {
				res.Rejections = append(res.Rejections, rj)
				continue
			}
			c.host = i
			if best == nil || better(c, best, h, hosts[best.host]) {
				best = c
			}
		}
		if best == nil {
			break
		}
		if !cloned[best.host] {
			c := *hosts[best.host]
			c.Claims = slices.Clone(c.Claims)
			hosts[best.host], cloned[best.host] = &c, true
		}
		h := hosts[best.host]
		res.Placements = append(res.Placements, commit(h, best, &r, int64(-(k+1))))
	}
	if r.AllOrNothing && !res.Complete() {
		res.Dropped = len(res.Placements)
		res.Placements = nil
	}
	return res
}

// evaluate runs one host through the pipeline for r: a rejection, or
// (ok) the candidate it fills in c, whose victims buffer it reuses.
func evaluate(a *arbiter, out *outcome, h *Host, r *Request, c *candidate) (Rejection, bool) {
	for _, ck := range checks {
		if why := ck.fn(h, r); why != "" {
			return Rejection{HostID: h.ID, Step: ck.step, Field: ck.field, Reason: why}, false
		}
	}
	z, step, field, why := size(h, r)
	if why != "" {
		return Rejection{HostID: h.ID, Step: step, Field: field, Reason: why}, false
	}
	if why := holdsWhy(h, r, z.units); why != "" {
		return Rejection{HostID: h.ID, Step: "booked", Reason: why}, false
	}
	*c = candidate{z: z, victims: c.victims[:0]}
	if g, ok := quickFit(h, z.units); ok {
		c.gpus = g
		return Rejection{}, true
	}
	nc := Claim{ID: 0, Class: ClassOf(r.RentalType), Bid: z.rates.ComputePerHour, Units: z.units, State: Waiting, Order: 1<<63 - 1, RAMMB: z.ramMB}
	a.arbitrate(h, &nc, out)
	if !out.newWins {
		return Rejection{HostID: h.ID, Step: "capacity", Reason: describeShort(h, r, z.units, out)}, false
	}
	if !h.IsGPU() && z.ramMB > 0 {
		var used int64
		for i := range h.Claims {
			if h.Claims[i].State == Owner && !victimOf(out.victims, h.Claims[i].ID) {
				used += h.Claims[i].RAMMB
			}
		}
		if used+z.ramMB > h.RAMMB {
			return Rejection{HostID: h.ID, Step: "capacity", Reason: fmt.Sprintf("offer %d has %d MB of free RAM, this rental needs %d MB", h.ID, h.RAMMB-used, z.ramMB)}, false
		}
	}
	c.gpus = out.newGPUs
	c.victims = append(c.victims, out.victims...)
	for _, v := range c.victims {
		c.preempts += v.Units
		c.victimB += v.Bid
	}
	return Rejection{}, true
}

// quickFit is the common case, decided without ranking anyone: a GPU host
// whose claims all own their GPUs and that has n free takes the newcomer on
// its lowest free positions, exactly as arbitrate would.
func quickFit(h *Host, n int) (GPUSet, bool) {
	if !h.IsGPU() {
		return 0, false
	}
	var owned GPUSet
	for i := range h.Claims {
		if h.Claims[i].State != Owner {
			return 0, false
		}
		owned |= h.Claims[i].GPUs
	}
	free := All(len(h.GPUIndex)) &^ owned
	if free.Count() < n {
		return 0, false
	}
	return free.Take(n), true
}

func victimOf(vs []Victim, id int64) bool {
	for _, v := range vs {
		if v.ID == id {
			return true
		}
	}
	return false
}

// commit applies a candidate to the working copy of its host: the
// newcomer owns its units (as claim id), its victims drain. It returns the
// placement.
func commit(h *Host, c *candidate, r *Request, id int64) Placement {
	for i := range h.Claims {
		if victimOf(c.victims, h.Claims[i].ID) {
			h.Claims[i].State = Draining
		}
	}
	h.Claims = append(h.Claims, Claim{ID: id, Class: ClassOf(r.RentalType), Bid: c.z.rates.ComputePerHour, Units: c.z.units,
		State: Owner, GPUs: c.gpus, RAMMB: c.z.ramMB, Order: id})
	p := Placement{HostID: h.ID, GPUs: c.gpus, CPUCores: c.z.cores, RAMMB: c.z.ramMB, Rates: c.z.rates, Preempt: c.victims}
	if h.IsGPU() {
		p.GPUIndexes = h.Indexes(c.gpus)
		if len(h.GPUUUID) == len(h.GPUIndex) {
			for _, pos := range c.gpus.Positions() {
				p.GPUUUIDs = append(p.GPUUUIDs, h.GPUUUID[pos])
			}
		}
	}
	p.HourlyCost = p.Rates.ComputePerHour + p.Rates.StoragePerHour(r.DiskGB)
	return p
}
